"""The product as it is installed, not as it lies in the checkout: a built wheel carries its templates, its
example program, its migrations and the sandbox's files, and works from outside the repository; the product
never imports moto (the sandbox's extra)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIP = (sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check")

# Imports every module of the product (not the sandbox), then says whether moto came with them.
IMPORT_EVERYTHING = """
import importlib, pkgutil, sys
import bot, handlers, storage
for package in (bot, handlers, storage):
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if module.name.endswith("__main__") or ".migrations" in module.name:
            continue  # running the CLI, and Alembic's env (it needs a migration context)
        importlib.import_module(module.name)
print(len(sys.modules), any(name == "moto" or name.startswith("moto.") for name in sys.modules))
"""


def test_the_product_does_not_import_moto() -> None:
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERYTHING], capture_output=True, text=True, cwd=ROOT, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    modules, moto = result.stdout.split()
    assert int(modules) > 300, "the walk imported the product"
    assert moto == "False", "moto is the sandbox's extra: no product module may import it"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a copy of the files git sees (not from the checkout, whose build/ may hold stale modules)."""
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    subprocess.run(
        [*PIP, "wheel", "--no-deps", str(source), "--wheel-dir", str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [built] = out.glob("pitcrew-*.whl")
    return built


def _tracked(folder: str, suffixes: tuple[str, ...]) -> set[str]:
    return {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / folder).rglob("*")
        if path.is_file() and path.suffix in suffixes and "__pycache__" not in path.parts
    }


def test_the_wheel_carries_every_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = (
        _tracked("bot/templates", (".yaml",))
        | _tracked("bot/examples", (".yml",))
        | _tracked("sandbox/specs", (".yaml", ".md"))
        | _tracked("storage/migrations", (".py", ".mako"))
        | {"sandbox/slack/console.html"}
    )
    assert len(expected) > 20
    assert expected - names == set()


def test_an_installed_wheel_checks_its_own_example_program(wheel: Path, tmp_path: Path) -> None:
    """Installed as a plain (not editable) package, away from the checkout: `pitcrew example-program` then
    `pitcrew check-config` on what it printed, with the packaged templates."""
    target = tmp_path / "site"
    subprocess.run(
        [*PIP, "install", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    # The dependencies come from this environment; the package itself from the wheel (PYTHONPATH goes first).
    env = {**os.environ, "PYTHONPATH": str(target)}
    env.pop("PITCREW_TEMPLATES", None)

    def pitcrew(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "bot", *args], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
        )

    where = subprocess.run(
        [sys.executable, "-c", "import bot; print(bot.__file__)"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert where.stdout.strip().startswith(str(target)), where.stdout + where.stderr
    example = pitcrew("example-program")
    assert example.returncode == 0, example.stderr
    program = tmp_path / "program.yml"
    program.write_text(example.stdout)
    checked = pitcrew("check-config", str(program))
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith("OK: GENIAC Phase 2: 12 orgs")
    assert "4 templates (hyperpod-p5, hyperpod-trn1, pcluster-p5-efa, pcluster-trn1)" in checked.stdout
