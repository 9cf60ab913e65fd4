"""Shared fixtures: databases (SQLite always, Postgres when PITCREW_TEST_POSTGRES_URL is set), and one moto
server for the session, seeded with the example program; real Prometheus servers holding given metrics
(`prometheus_with`).

Migrating a new database takes about 0.3 s, so the suite migrates one per backend for the session and
gives each test that wants a migrated database a copy of it (`db`, `migrated_sqlite`); the migrations
themselves are tested on the empty databases `database_url` gives."""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from bot.clusters.accounts import AwsAccounts
from bot.config import ProgramConfig, load_program
from sandbox.moto_support import MotoSnapshot, reset_moto_server, restore_moto, snapshot_moto, start_moto_server
from sandbox.prometheus import PrometheusPool
from sandbox.seed import SeedReport, seed_program
from sandbox.world import EXAMPLE_PROGRAM, aws_environment
from storage.db import Database, upgrade

ROOT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--clock-at",
        metavar="ISO",
        help="run each test with the clock set a moment before this instant (e.g. 2026-12-04T15:00:00Z, midnight in "
        "Tokyo) and ticking on: no test may depend on the time of day, the day or the week it runs in",
    )
    parser.addoption(
        "--clock-lead",
        type=float,
        default=0.5,
        metavar="SECONDS",
        help="with --clock-at: how many seconds before that instant each test starts (default 0.5)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "real_clock: the test needs the real wall clock even under --clock-at (it reads what a process outside "
        "this one stamped with the real time, e.g. a live Prometheus scrape)",
    )
    _share_botocore_loader()
    _share_tls_context()
    _collect_less_often()


def _collect_less_often() -> None:
    """The suite makes short-lived objects by the million (ORM rows, Hypothesis examples, Block Kit dicts), and
    CPython runs its youngest-generation collection every 700 net allocations: with a threshold of 100,000, and what
    pytest and its plugins made frozen out of the collector's way, the suite's CPU is about 5 % less (measured on the
    scenario and HTTP-fuzz modules, 3 workers: 83-85 s of user CPU against 88-92 s). A test process has memory to
    spare (about 10 % more at its peak); the product keeps CPython's defaults."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


def _share_botocore_loader() -> None:
    """Every botocore session of this test process reads service models through one loader.

    Pitcrew makes its clients from one long-lived session (bot/clusters/accounts.py), so it parses each
    service's model once per process; the tests make fresh sessions by the hundred (every sandbox, every re-seed,
    every doctor run), and each parsed the EC2 and SageMaker models again: 0.3-0.5 s of CPU a session, about a
    fifth of the suite. The models are read-only data and the loader caches per instance, so one shared loader
    per data path gives every session the same parsed models."""
    import functools

    import botocore.session

    botocore.session.create_loader = functools.lru_cache(maxsize=None)(botocore.session.create_loader)


def _share_tls_context() -> None:
    """Every httpx client the tests make with the default verification shares one TLS context, as Pitcrew's own
    clients do (bot/tls.py): httpx parses certifi's bundle for each new client (about 20 ms of CPU), and the tests
    make hundreds (a client per request in the fuzz tests and the polling helpers): 1.5 % of the suite's samples."""
    import httpx._transports.default as transports

    from bot.tls import tls_context

    make = transports.create_ssl_context

    def shared(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        if verify is True and cert is None and trust_env:
            return tls_context()
        return make(verify=verify, cert=cert, trust_env=trust_env)

    transports.create_ssl_context = shared


def _clock_instant(config: pytest.Config) -> datetime | None:
    at = config.getoption("--clock-at")
    if not at:
        return None
    instant = datetime.fromisoformat(at.replace("Z", "+00:00"))
    if instant.tzinfo is None:
        raise pytest.UsageError("--clock-at needs a time zone, e.g. 2026-12-04T15:00:00Z")
    return instant


@pytest.fixture(scope="session", autouse=True)
def _clock_at_session(request: pytest.FixtureRequest) -> Iterator[None]:
    """`--clock-at`: the session starts an hour before the instant, so what the session's fixtures make (the
    seeded AWS world, the migrated databases) is dated before any test's own clock, as in a real run."""
    instant = _clock_instant(request.config)
    if instant is None:
        yield
        return
    import time_machine

    with time_machine.travel(instant - timedelta(hours=1), tick=True):
        yield


@pytest.fixture(autouse=True)
def _clock_at(request: pytest.FixtureRequest, _clock_at_session: None) -> Iterator[None]:
    """`--clock-at`: each test starts `--clock-lead` seconds before the instant, and time goes on from there
    (time-machine moves datetime.now and time.time; asyncio's monotonic clock is left alone), so each crosses it
    early in its run. Without the option nothing is patched."""
    instant = _clock_instant(request.config)
    if instant is None:
        yield
        return
    import time_machine

    if request.node.get_closest_marker("real_clock") is not None:
        start = time_machine.escape_hatch.time.time()  # back to the wall clock, from under the session's travel
    else:
        start = (instant - timedelta(seconds=request.config.getoption("--clock-lead"))).timestamp()
    with time_machine.travel(start, tick=True):
        yield


async def _admin(url: str, sql: str) -> None:
    import asyncpg

    parsed = make_url(url)
    connection = await asyncpg.connect(
        host=parsed.host,
        port=parsed.port or 5432,
        user=parsed.username,
        password=parsed.password,
        database=parsed.database,
    )
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


def _fresh_postgres(base_url: str) -> Iterator[str]:
    """A database of its own for one test, dropped afterwards, so runs never see each other's rows."""
    name = f"pitcrew_test_{uuid.uuid4().hex[:12]}"
    try:
        asyncio.run(_admin(base_url, f'CREATE DATABASE "{name}"'))
    except OSError as error:
        # Set but unreachable is a failure, not a skip: CI relies on these tests running.
        pytest.fail(f"PITCREW_TEST_POSTGRES_URL is set but Postgres is unreachable: {error}")
    try:
        yield make_url(base_url).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_admin(base_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'pitcrew.db'}"
        return
    base = os.environ.get("PITCREW_TEST_POSTGRES_URL")
    if not base:
        pytest.skip("PITCREW_TEST_POSTGRES_URL is not set")
    yield from _fresh_postgres(base)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head, once for the session; tests get copies (`migrated_sqlite`)."""
    path = tmp_path_factory.mktemp("template") / "pitcrew.db"
    upgrade(f"sqlite+aiosqlite:///{path}")
    return path


def migrated_sqlite(template: Path, path: Path) -> str:
    """A copy of the migrated template at `path`, as a database URL: a new migrated database, made at once."""
    shutil.copyfile(template, path)
    return f"sqlite+aiosqlite:///{path}"


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    """A Postgres database migrated to head, once for the session, that tests' databases are created from."""
    base = os.environ["PITCREW_TEST_POSTGRES_URL"]
    for url in _fresh_postgres(base):
        upgrade(url)
        yield str(make_url(url).database)


@pytest.fixture
def migrated_database_url(database_url: str, request: pytest.FixtureRequest) -> str:
    """`database_url`'s database, replaced by a copy of the session's migrated one."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        return migrated_sqlite(request.getfixturevalue("sqlite_template"), Path(str(url.database)))
    template: str = request.getfixturevalue("postgres_template")
    base = os.environ["PITCREW_TEST_POSTGRES_URL"]
    asyncio.run(_admin(base, f'DROP DATABASE "{url.database}"'))
    asyncio.run(_admin(base, f'CREATE DATABASE "{url.database}" TEMPLATE "{template}"'))
    return database_url


@pytest.fixture
async def db(migrated_database_url: str) -> AsyncIterator[Database]:
    """A migrated database of its own for the test: SQLite, and Postgres when configured."""
    database = Database(url=migrated_database_url)
    await database.upgrade()
    yield database
    await database.dispose()


@dataclass(frozen=True)
class SeededAws:
    endpoint: str
    report: SeedReport
    program: ProgramConfig
    accounts: AwsAccounts  # Pitcrew's per-org sessions into this seeding's accounts

    def intact(self) -> bool:
        """Still seeded? moto keeps state in-process, and the sandbox's own tests empty it."""
        from moto.sagemaker.models import sagemaker_backends

        first = next(c for c in self.report.clusters if c.backend == "hyperpod")
        return first.name in sagemaker_backends[first.account_id][first.region].clusters

    def state(self) -> list[tuple[Any, ...]]:
        """What a command could change, in every account and region: clusters, their nodes, EC2 instances.

        Read from moto's in-process backends (the server shares them); STS/IAM keys are left out because
        Pitcrew's own sessions create them."""
        from moto.ec2.models import ec2_backends
        from moto.sagemaker.models import sagemaker_backends

        state: list[tuple[Any, ...]] = []
        for account, regions in list(sagemaker_backends.items()):
            for region, backend in list(regions.items()):
                for name, cluster in list(backend.clusters.items()):
                    nodes = sorted((node_id, node.status) for node_id, node in list(cluster.nodes.items()))
                    state.append(("hyperpod", account, region, name, cluster.status, tuple(nodes)))
        for account, regions in list(ec2_backends.items()):
            for region, backend in list(regions.items()):
                for instance in backend.all_instances():
                    state.append(("ec2", account, region, instance.id, instance.state, instance.instance_type))
        return sorted(state, key=repr)


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """One moto server for the whole run (moto's state is per process anyway), reached through the
    standard AWS variables, AWS_ENDPOINT_URL included."""
    server, endpoint = start_moto_server()
    try:
        with aws_environment(endpoint):
            yield endpoint
    finally:
        server.stop()


_SEEDED: list[SeededAws] = []
_JUST_SEEDED: list[MotoSnapshot] = []  # moto right after the seeding, restored instead of seeding again


@pytest.fixture
def seeded_aws(moto_endpoint: str) -> SeededAws:
    """The example program seeded into moto: seeded once, and brought back only if a test emptied moto (from
    a snapshot of moto just after the seeding: seeding again took 6-9 s, a restore takes a fraction of one)."""
    if not _SEEDED or not _SEEDED[-1].intact():
        if _JUST_SEEDED:
            # The restore keeps the keys Pitcrew's sessions were issued, so the same sessions (and their
            # clients, made once as in a long-lived bot) go on working.
            restore_moto(moto_endpoint, _JUST_SEEDED[0])
        else:
            reset_moto_server(moto_endpoint)
            program = load_program(EXAMPLE_PROGRAM)
            seeded = SeededAws(moto_endpoint, seed_program(program, endpoint_url=moto_endpoint), program, AwsAccounts())
            _JUST_SEEDED.append(snapshot_moto())
            _SEEDED.append(seeded)
    return _SEEDED[-1]


@pytest.fixture(scope="session")
def prometheus_with() -> Iterator[Callable[..., str]]:
    """`prometheus_with(*cluster_metrics, node_label="instance_id", cluster_label="cluster") -> URL`: a real
    Prometheus (Debian's 2.42) holding exactly these clusters' series, backfilled with promtool (counters as the
    exporters count them, so `rate()` gives the rates back). The same data asked again, by any test of this
    process, is served by the same server; the 8 last asked for keep running, all are stopped at the end of the
    session.
    Read-only: do not rely on a server's contents beyond what you passed."""
    pool = PrometheusPool(keep=8)  # ~50 MB each; a test or module fixture may hold up to 8 URLs at once
    try:
        yield pool.holding
    finally:
        pool.close()
