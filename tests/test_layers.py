"""The layers point down: every import in bot/, handlers/ and storage/ (at module level, in a function, under
`if TYPE_CHECKING`) goes to its own layer or one below. The domain hands plain data to presenters and is
given what it needs from above (a presenter, a publisher, a list of names) by the wiring; it never imports it.

Imports under `if TYPE_CHECKING` count too: a type named from above is still a dependency on what the upper
layer means, and the fix is the same (a protocol or plain type defined low)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("storage", "bot", "handlers")

# Bottom to top. A module is in the layer of the longest prefix naming it (`bot` catches the rest of bot/).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("storage", ("storage",)),
    # Plain data and pure rules, the monitors and coordinators (given their presenter and publisher).
    ("domain", ("bot",)),
    # Runs what bot.clusters plans (plan -> Confirm -> run -> watch): bot.clusters builds on it through a protocol.
    # The approval desk stands in front of Confirm and runs an approved change through it.
    ("operations", ("bot.operations", "bot.approvals.desk")),
    # The command tables: what can be typed, parsed into the domain's requests.
    ("commands", ("bot.subcommands", "bot.commands", "bot.tracking.parse", "bot.digest.parse")),
    # Block Kit, mrkdwn pages and pictures made from the domain's data.
    ("presenters", ("bot.slack", "bot.digest.render", "bot.digest.markdown", "bot.home.render", "bot.home.usage")),
    # What listeners are given (Services) and the leader's jobs.
    ("services", ("bot.services", "bot.scheduler")),
    ("handlers", ("handlers",)),
    # Builds everything once, registers the listeners, runs.
    ("wiring", ("bot.app", "bot.cli", "bot.__main__")),
)


def layer_of(module: str) -> int:
    best, found = -1, -1
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), rank
    return found


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        down, up = LAYERS[layer_of(self.importer)][0], LAYERS[layer_of(self.imported)][0]
        return f"{self.importer}:{self.line} ({down}) imports {self.imported} ({up})"


def product_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imports_of(module: str, source: str, known: set[str]) -> Iterator[Import]:
    """Every import of a product module by `module`, wherever in the file it is written (ast.walk reaches
    function bodies and `if TYPE_CHECKING` blocks). `from a.b import c` is the module a.b.c when that is
    one, else a.b."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            targets = [f"{node.module}.{alias.name}" for alias in node.names]
            targets = [name if name in known else node.module for name in targets]
        else:
            continue  # relative imports: the product has none, and a `from . import x` would fail the map below
        for target in dict.fromkeys(targets):
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != module:
                yield Import(module, target, node.lineno)


def upward_imports() -> list[Import]:
    modules = product_modules()
    known = set(modules)
    return [
        found
        for module, path in modules.items()
        for found in imports_of(module, path.read_text(encoding="utf-8"), known)
        if layer_of(found.imported) > layer_of(found.importer)
    ]


def test_every_import_points_down() -> None:
    upward = upward_imports()
    assert not upward, f"{len(upward)} imports from a lower layer up:\n" + "\n".join(map(str, upward))


def test_the_map_names_modules_that_exist() -> None:
    known = set(product_modules())
    stale = [prefix for _, prefixes in LAYERS for prefix in prefixes if prefix not in known]
    assert not stale, f"the layer map names modules that are gone: {stale}"


def test_the_walk_sees_imports_in_functions_and_type_checking_blocks() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from bot.slack import blocks\n"
        "if TYPE_CHECKING:\n"
        "    from bot.operations import Operations\n"
        "def f() -> None:\n"
        "    import bot.commands\n"
        "    from bot.digest.parse import DIGEST\n"
    )
    known = {"bot", "bot.slack", "bot.slack.blocks", "bot.operations", "bot.commands", "bot.digest.parse", "bot.x"}
    found = [(i.imported, i.line) for i in imports_of("bot.x", source, known)]
    assert found == [("bot.slack.blocks", 2), ("bot.operations", 4), ("bot.commands", 6), ("bot.digest.parse", 7)]
    assert [layer_of(name) for name, _ in found] == [4, 2, 3, 3]
