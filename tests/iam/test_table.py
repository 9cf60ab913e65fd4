"""The table of actions (bot.iam.actions) against the code: every AWS call the code can make is in the table, and
every call the table lists is made somewhere. Read from the source (an AST scan), so it holds for paths no test
runs; the IAM-enforced scenarios (test_enforced.py) check the same table against calls as they happen."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import botocore.session
from botocore import xform_name

from bot.iam import actions
from bot.iam.actions import PERMISSIONS, Principal

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("bot", "handlers", "storage")
# Where the ParallelCluster API and Prometheus are called over HTTP (not through boto3).
PCLUSTER_MODULES = (ROOT / "bot" / "clusters" / "parallelcluster.py", ROOT / "bot" / "iam" / "probes.py")
PROMETHEUS_MODULE = ROOT / "bot" / "node_metrics" / "prometheus.py"
HTTP_SENDERS = {"_send": None, "_get": "GET", "_paged": "GET"}  # ParallelClusterApiBackend's request helpers


@functools.cache
def _sources() -> tuple[tuple[Path, ast.Module], ...]:
    """The product's modules, parsed once per process (each test here walks them all: about 3 s apiece)."""
    return tuple(
        (path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    )


def _services_in_table() -> set[str]:
    return {call.split(".", 1)[0] for call in actions.calls() if "." in call and " " not in call}


@functools.cache
def _operations() -> dict[str, set[str]]:
    """snake_case method name -> {"service.Operation", ...} for the services the product makes clients of."""
    session = botocore.session.get_session()
    found: dict[str, set[str]] = {}
    for service in _services_in_table() | _client_services():
        model = session.get_service_model(service)
        for operation in model.operation_names:
            found.setdefault(xform_name(operation), set()).add(f"{service}.{operation}")
    return found


@functools.cache
def _client_services() -> set[str]:
    """Every service the product makes a boto3 client of: client(org, "x"), home_client("x", ...), .client("x")."""
    found: set[str] = set()
    for _, tree in _sources():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("client", "home_client", "_make_client")
            ):
                found |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return found


def _path(node: ast.expr) -> str | None:
    """A request path from a constant or an f-string, each placeholder as `*` (as IAM resource patterns say)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "*" for v in node.values)
    return None


def _not_a_client(receiver: ast.expr) -> bool:
    """`re.search(...)`, `PATTERN.search(...)`: a name some AWS operation also has (SageMaker's Search)."""
    return isinstance(receiver, ast.Name) and (receiver.id == "re" or receiver.id.lstrip("_").isupper())


@functools.cache
def boto3_calls() -> dict[str, set[str]]:
    """Each boto3 call the product's source names (a method, a paginator, an operation model) -> where."""
    operations = _operations()
    found: dict[str, set[str]] = {}

    def add(candidates: set[str], where: str) -> None:
        # A name some AWS service has: if none of its services is in the table, it is reported as all of them.
        known = candidates & actions.calls()
        for call in known or candidates:
            found.setdefault(call, set()).add(where)

    for path, tree in _sources():
        # boto3's client methods take keywords only: `pattern.search(text)` is a regex, not SageMaker's Search.
        positional = {
            id(node.func)
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
        }
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if (
                isinstance(node, ast.Attribute)
                and node.attr in operations
                and id(node) not in positional
                and not _not_a_client(node.value)
            ):
                add(operations[node.attr], where)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                first = node.args[0]
                if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                    continue
                if node.func.attr == "get_paginator" and first.value in operations:
                    add(operations[first.value], where)
                if node.func.attr == "operation_model" and xform_name(first.value) in operations:
                    add(operations[xform_name(first.value)], where)
    return found


def _routes(module: Path) -> dict[str, set[str]]:
    """The ParallelCluster API routes a module requests through ParallelClusterApiBackend's helpers."""
    found: dict[str, set[str]] = {}
    tree = ast.parse(module.read_text(encoding="utf-8"))
    paths: dict[str, str] = {}  # `path = f"/v3/..."` in a method, then `_send("PUT", path)`
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and (assigned := _path(node.value)) is not None
        ):
            paths[node.targets[0].id] = assigned
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in HTTP_SENDERS:
            method = HTTP_SENDERS[node.func.attr]
            args = list(node.args)
            if method is None:  # _send(METHOD, PATH, ...)
                if not args or not isinstance(args[0], ast.Constant):
                    continue
                method, args = str(args[0].value), args[1:]
            path = (paths.get(args[0].id) if isinstance(args[0], ast.Name) else _path(args[0])) if args else None
            if path is not None and path.startswith("/v3/"):
                found.setdefault(f"execute-api {method} {path}", set()).add(f"{module.name}:{node.lineno}")
    return found


def http_calls() -> dict[str, set[str]]:
    """The ParallelCluster API routes and Prometheus paths the product requests."""
    found: dict[str, set[str]] = {}
    for module in PCLUSTER_MODULES:
        for route, where in _routes(module).items():
            found.setdefault(route, set()).update(where)
    tree = ast.parse(PROMETHEUS_MODULE.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr | ast.Constant):
            for route in re.findall(r"/api/v1/[a-z_]+", _path(node) or ""):
                found.setdefault(f"aps POST {route}", set()).add(f"prometheus.py:{node.lineno}")
    return found


def test_every_call_in_the_code_is_in_the_table() -> None:
    missing = {call: sorted(where) for call, where in {**boto3_calls(), **http_calls()}.items()}
    missing = {call: where for call, where in missing.items() if call not in actions.calls() | actions.FREE_CALLS}
    assert not missing, (
        "the code calls AWS actions the table (bot/iam/actions.py) lacks; add a row for each "
        f"(the feature, read or change, its resource): {missing}"
    )


def test_every_call_in_the_table_is_made_by_the_code() -> None:
    made = set(boto3_calls()) | set(http_calls())
    stale = sorted(actions.calls() - made)
    assert not stale, f"the table lists calls nothing makes (remove them, or they widen every org's role): {stale}"


def test_every_service_the_product_has_clients_of_is_in_the_table() -> None:
    assert _client_services() <= _services_in_table(), _client_services() - _services_in_table()


def test_every_row_names_a_feature_a_resource_and_a_principal() -> None:
    for row in PERMISSIONS:
        assert row.feature and row.resource and row.calls, row
        assert (row.resource == "*") == bool(row.why_unscoped), f"{row.action}: a * resource says why"
        scoped = "{account}" in row.resource or row.resource in ("*", "{execution_role}")
        assert row.principal is Principal.PITCREW or scoped, row.action


def test_the_readme_holds_the_table() -> None:
    """The README's copy is the generated table (regenerate it with `pitcrew iam-table`)."""
    from bot.iam.table import BEGIN, END, markdown

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start, end = readme.index(BEGIN), readme.index(END) + len(END)
    assert readme[start:end] == markdown().strip(), "README.md's table differs: paste `pitcrew iam-table` in its place"
