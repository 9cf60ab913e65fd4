"""Property-based tests of the HTTP app with signed requests (hypothesis), on a fixed budget.

Against the sandbox world (moto server, local Slack over HTTP, Pitcrew served over HTTP), whatever a person
types or a client sends:
- no response is a 5xx, and every signed request is answered within Slack's 3 seconds;
- no reply says "internal error" (or the error boundary's "could not handle"): bad input gets a clear answer;
- nothing in AWS changes (no Confirm is ever given a real plan here, so nothing may mutate);
- every slash command is audited: one audit row per command sent.

The budget (EXAMPLES, about 1,800 in all) is derandomized so CI time and coverage are the same on every run.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from bot.commands import USAGE
from bot.digest.parse import DIGEST_USAGE
from bot.digest.render import (
    TRACK_ADD_ACTION,
    TRACK_KIND_BLOCK,
    TRACK_KIND_INPUT,
    TRACK_ORG_BLOCK,
    TRACK_ORG_INPUT,
    TRACK_TEXT_BLOCK,
    TRACK_TEXT_INPUT,
    TRACK_VIEW,
)
from bot.slack.alerts import ACK_ACTION, REBOOT_ACTION, REPLACE_ACTION
from bot.slack.blocks import (
    CANCEL_ACTION,
    CONFIRM_ACTION,
    DELETE_NAME_BLOCK,
    DELETE_NAME_INPUT,
    DELETE_OPEN_ACTION,
    DELETE_VIEW,
)
from bot.tracking.parse import TRACK_USAGE
from sandbox.slack import Message, signed_headers
from sandbox.world import SIGNING_SECRET, Sandbox
from storage.models import AuditEntry
from tests.conftest import SeededAws
from tests.scenarios import conftest as scenarios
from tests.scenarios.conftest import ADMIN, COORDINATION, body

# The scenario fixtures (`sandbox` and what it needs) for this module: a test module outside tests/scenarios/
# does not see that folder's conftest, and pytest registers a fixture under the module attribute's name.
globals().update(sandbox=scenarios.sandbox, sandbox_factory=scenarios.sandbox_factory)

ALICE, BOB, GUEST = "U0ALICE01", "U0BOB0001", "U0GUEST01"  # operator and viewer of kumo-labs; in no org
ROLES = {"admin": ADMIN, "operator": ALICE, "viewer": BOB, "guest": GUEST}
CHANNELS = ["C0KUMOLAB", "C0SAKURA1", COORDINATION, "C0NOWHERE1"]
ACK_SECONDS = 3.0  # Slack's deadline: 95% of answers must be in time even on a loaded machine
HANG_SECONDS = 10.0  # any one answer: a listener that waits for Bolt's ack timeout would show here
# Examples per test: about 1,850 in all (the database test runs once per database). Commands get the most:
# they are what people type.
SCALE = float(os.environ.get("PITCREW_FUZZ_SCALE", "1"))  # e.g. 0.05 for a quick look while developing
EXAMPLES = {"cluster": 400, "track": 300, "digest": 150, "clicks": 350, "views": 250, "raw": 200, "database": 100}
FORBIDDEN = ("internal error", "could not handle")


def fuzz_settings(examples: int) -> Any:
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        derandomize=True,
        database=None,
    )


# ------------------------------------------------------------------ strategies

ORGS = ["kumo-labs", "sakura-ai", "kumo-lab", "nosuch-org", "all", "KUMO-LABS"]
CLUSTERS = ["kumo-p5-train", "kumo-p5", "sakura-trn1-pretrain", "no-such-cluster", "kumo-labs/kumo-p5-train"]
NUMBERS = ["0", "1", "4", "16", "-1", "²", "٣", "999999999999", "1e3", "0x10", "3.5", ""]
NODES = ["i-0123456789abcdef0", "i-01234567", "node-1", "i-"]
WEEKS = ["2026-W1", "2026-W01", "2026-W53", "2020-W53", "0000-W01", "2026-w48", "W48"]
FLAGS = ["--public", "--failed", "--dry-run", "--force", "--count", "--org", "--param", "--hours", "--days"]
FLAGS += ["--weeks", "--week", "--ids", "--", "-x"]
PARAMS = ["--param K=V", "--param x", "--param =1", "--param InstanceCount=²"]
KEYS = ["model_size=70B", "framework='NeMo 2.0'", "colour=blue", "x-colour=blue", "Model-Size=1", "k=", "=v"]

junk = st.text(max_size=40)  # every Unicode category but surrogates, control characters included
controls = st.text(alphabet=st.characters(codec=None, categories=["Cc", "Cf", "Zl", "Zp"]), min_size=1, max_size=5)
long_text = st.integers(min_value=900, max_value=5000).map(lambda n: ("x " * n)[:n])
vocabulary = st.sampled_from(ORGS + CLUSTERS + NUMBERS + NODES + WEEKS + FLAGS + PARAMS + KEYS)
word = st.one_of(vocabulary, vocabulary, junk, controls, st.sampled_from(["'", '"', "`", "<!channel>", "&", "#12"]))


def command_text(subcommands: list[str]) -> st.SearchStrategy[str]:
    shaped = st.builds(
        lambda sub, words, sep: sep.join([sub, *words]),
        st.sampled_from(subcommands + [s.upper() for s in subcommands[:2]]),
        st.lists(word, max_size=6),
        st.sampled_from([" ", "  ", "\t", "\n"]),
    )
    return st.one_of(shaped, shaped, shaped, junk, long_text, controls)


# Well-formed commands with real names and random values reach the deep paths: plans, quota, dry runs.
CLUSTER_NAMES = ["kumo-p5-train", "kumo-p5-dev", "sakura-trn1-pretrain", "hikari-p5-llm", "kaze-trn1-train"]
CLUSTER_NAMES += ["umi-lang/x", "kumo-labs/kumo-p5-dev", "kumo-p5-trian"]
GROUPS = ["worker-group-1", "controller-machine", "compute-gpu", "compute-gpu/p5", "compute-trn", "nosuch"]
TEMPLATES = ["hyperpod-p5", "hyperpod-trn1", "pcluster-p5-efa", "pcluster-trn1", "nosuch-template"]
names, groups, numbers = st.sampled_from(CLUSTER_NAMES), st.sampled_from(GROUPS), st.sampled_from(NUMBERS) | junk
flag = st.sampled_from(["", "--dry-run", "--public", "--failed", "--hours 6", "--hours ²", "--days 999999999999"])
deep_cluster = st.one_of(
    st.builds("scale {} {} {} {}".format, names, groups, numbers, flag),
    st.builds("{} {} {} {}".format, st.sampled_from(["replace", "reboot"]), names, st.sampled_from(NODES), flag),
    st.builds("{} {} {}".format, st.sampled_from(["status", "nodes", "delete", "throughput"]), names, flag),
    st.builds(
        "launch {} {} --count {} --org {} --param {}={} {}".format,
        st.sampled_from(TEMPLATES),
        st.sampled_from(["new-one", "kumo-p5-train", "x" * 70]),
        numbers,
        st.sampled_from(ORGS),
        st.sampled_from(["InstanceCount", "Nope", "VpcId"]),
        numbers,
        flag,
    ),
    st.builds("list {} {}".format, st.sampled_from(ORGS), flag),
    st.builds("audit {} {}".format, st.sampled_from(ORGS), flag),
)
CLUSTER_TEXT = st.one_of(command_text(list(USAGE)), deep_cluster)
deep_track = st.one_of(
    st.builds("{} {} --org {}".format, st.sampled_from(["note", "incident", "lesson"]), junk, st.sampled_from(ORGS)),
    st.builds("require {} {} --org {}".format, st.sampled_from(KEYS), st.sampled_from(KEYS), st.sampled_from(ORGS)),
    st.builds("{} {} --weeks {}".format, st.sampled_from(["show", "doc"]), st.sampled_from(ORGS), numbers),
    st.builds("resolve {}".format, numbers),
)
TRACK_TEXT = st.one_of(command_text(list(TRACK_USAGE)), deep_track)
deep_digest = st.builds(
    "preview {} --week {}".format, st.sampled_from([*ORGS, ""]), st.sampled_from(WEEKS) | st.sampled_from(NUMBERS)
)
DIGEST_TEXT = st.one_of(command_text(list(DIGEST_USAGE)), deep_digest)
role = st.sampled_from(list(ROLES))
channel = st.sampled_from(CHANNELS)

ACTION_IDS = [CONFIRM_ACTION, CANCEL_ACTION, "launch_confirm", "launch_cancel", DELETE_OPEN_ACTION, TRACK_ADD_ACTION]
ACTION_IDS += [ACK_ACTION, REPLACE_ACTION, REBOOT_ACTION, "alert_silence_1", "alert_silence_24", "alert_silence_99"]
ACTION_IDS += ["alert_silence_", "no_such_action"]
value = st.one_of(
    st.sampled_from(["", "²", "999999999999", "-1", "0", "1", "kumo-labs", "0" * 32, "f" * 64, "1e9", "null"]),
    junk,
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    long_text,
)
json_junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | junk,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(junk, children, max_size=3),
    max_leaves=8,
)


# ------------------------------------------------------------------ the harness


@dataclass
class Tally:
    """What the fuzzer sent and saw, reported at the end of each test."""

    sent: int = 0
    commands: int = 0
    audit_rows: int = 0  # rows the commands added to the audit log
    statuses: dict[int, int] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)

    def saw(self, status: int, seconds: float) -> None:
        self.sent += 1
        self.statuses[status] = self.statuses.get(status, 0) + 1
        self.seconds.append(seconds)

    def p95(self) -> float:
        ordered = sorted(self.seconds)
        return ordered[int(0.95 * (len(ordered) - 1))] if ordered else 0.0

    def report(self, name: str) -> str:
        five_xx = sum(count for status, count in self.statuses.items() if status >= 500)
        return (
            f"{name}: {self.sent} requests, statuses {dict(sorted(self.statuses.items()))}, 5xx {five_xx}, "
            f"'internal error' replies 0, {self.commands} commands / {self.audit_rows} audit rows, "
            f"answer p95 {self.p95():.2f}s, slowest {max(self.seconds, default=0.0):.2f}s"
        )


async def audit_rows(world: Sandbox) -> int:
    await world.pitcrew.services.audit.flush()
    async with world.pitcrew.services.db.session() as session:
        return int((await session.execute(select(func.count()).select_from(AuditEntry))).scalar_one())


def _is_listener(task: asyncio.Task[Any]) -> bool:
    return "run_ack_function_asynchronously" in getattr(task.get_coro(), "__qualname__", "")


async def settled(world: Sandbox, *, timeout: float = 20.0) -> None:
    """Every Bolt listener has finished (they run on after the ack) and the bot's own work is done."""
    deadline = time.monotonic() + timeout
    while True:
        running = [t for t in asyncio.all_tasks() if not t.done() and _is_listener(t)]
        if not running:
            break
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"{len(running)} listener(s) still running after {timeout}s"
        await asyncio.wait(running, timeout=remaining)
    await world.pitcrew.services.drain()


async def deliver(world: Sandbox, tally: Tally, body_text: str, *, content_type: str | None = None) -> httpx.Response:
    """POST a body signed exactly as Slack signs it; check the answer is below 500 and in time."""
    headers = signed_headers(body_text, secret=SIGNING_SECRET, timestamp=int(time.time()))
    if content_type is not None:
        headers["Content-Type"] = content_type
    started = time.monotonic()
    # The local Slack's own client (one per loop, kept alive), as its deliveries use.
    response = await world.slack._client().post(world.slack.events_url, content=body_text.encode(), headers=headers)
    elapsed = time.monotonic() - started
    tally.saw(response.status_code, elapsed)
    assert response.status_code < 500, (response.status_code, response.text[:300])
    assert elapsed < HANG_SECONDS, f"answered after {elapsed:.1f}s"
    assert not any(word in response.text.lower() for word in FORBIDDEN), response.text[:300]
    return response


def bot_messages_since(world: Sandbox, before: int) -> list[Message]:
    return [m for m in world.slack.messages[before:] if m.user == world.slack.bot_user_id]


def assert_no_forbidden(messages: list[Message]) -> None:
    for message in messages:
        seen = body(message).lower()
        assert not any(word in seen for word in FORBIDDEN), body(message)[:500]


async def one_example(world: Sandbox, aws: SeededAws, send: Callable[[], Awaitable[None]]) -> None:
    before_messages, before_state = len(world.slack.messages), aws.state()
    await send()
    await settled(world)
    assert_no_forbidden(bot_messages_since(world, before_messages))
    assert aws.state() == before_state, "AWS changed without a Confirm"


async def command(world: Sandbox, aws: SeededAws, tally: Tally, *, name: str, user: str, where: str, text: str) -> None:
    rows = await audit_rows(world)

    async def send() -> None:
        form = world.slack.slash_command_form(user_id=user, channel_id=where, command=name, text=text)
        before = len(world.slack.messages)
        response = await deliver(world, tally, urlencode(form))
        assert response.status_code == 200 and not response.content, "ack empty: one command, one reply"
        tally.commands += 1
        # The reply comes through the command's response URL (a digest sent posts in channels too).
        reply = await world.slack.wait_for(lambda m: m.via == "response_url", since=before, timeout=15)
        assert reply.text.strip(), "a reply says something (not a lone emoji)"

    await one_example(world, aws, send)
    added = await audit_rows(world) - rows
    tally.audit_rows += added
    assert added == 1, f"{name} {text!r} added {added} audit rows, not one"


@pytest.fixture
def tally(request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]) -> Any:
    counts = Tally()
    yield counts
    with capsys.disabled():  # the counts are the point of the run: shown with the results, without -s
        print(f"\n{counts.report(request.node.name)}")  # noqa: T201
    assert counts.p95() < ACK_SECONDS, counts.report(request.node.name)


@pytest.fixture
async def world_on(sandbox_factory: Callable[..., Any], database_url: str) -> AsyncIterator[Sandbox]:
    """The sandbox world on the `database_url` fixture's database: SQLite, and Postgres when configured."""
    async with sandbox_factory(database_url=database_url) as world:
        await world.pitcrew.ready.wait()
        await world.pitcrew.services.drain()
        yield world


# ------------------------------------------------------------------ slash commands


@fuzz_settings(EXAMPLES["cluster"])
@given(who=role, where=channel, text=CLUSTER_TEXT)
@example(who="admin", where=COORDINATION, text="list nosuch-org")
@example(who="admin", where=COORDINATION, text="list kumo-lab")
@example(who="admin", where=COORDINATION, text="list --public 2026-W1")
@example(who="admin", where=COORDINATION, text="launch hyperpod-p5 x --org nosuch-org --dry-run")
@example(who="operator", where="C0KUMOLAB", text="launch hyperpod-p5 x --org sakura-ai --dry-run")
@example(who="viewer", where="C0KUMOLAB", text="status sakura-ai/sakura-trn1-pretrain")
@example(who="admin", where=COORDINATION, text="status \x00")
@example(who="admin", where=COORDINATION, text="status payload")
@example(who="admin", where=COORDINATION, text="scale kumo-p5-train worker-group-1 ²")
@example(who="admin", where=COORDINATION, text="throughput nosuch-org/x --hours 999999999999")
async def test_cluster_commands_from_every_role(
    sandbox: Sandbox, seeded_aws: SeededAws, tally: Tally, who: str, where: str, text: str
) -> None:
    await command(sandbox, seeded_aws, tally, name="/cluster", user=ROLES[who], where=where, text=text)


@fuzz_settings(EXAMPLES["track"])
@given(who=role, where=channel, text=TRACK_TEXT)
@example(who="operator", where="C0KUMOLAB", text="require colour=blue")
@example(who="operator", where="C0KUMOLAB", text="note a\x7fb")
@example(who="admin", where=COORDINATION, text="show nosuch-org")
@example(who="admin", where=COORDINATION, text="note x --org kumo-lab")
@example(who="operator", where="C0KUMOLAB", text="resolve 999999999")
async def test_track_commands_from_every_role(
    sandbox: Sandbox, seeded_aws: SeededAws, tally: Tally, who: str, where: str, text: str
) -> None:
    await command(sandbox, seeded_aws, tally, name="/track", user=ROLES[who], where=where, text=text)


@fuzz_settings(EXAMPLES["digest"])
@given(who=role, where=channel, text=DIGEST_TEXT)
@example(who="admin", where=COORDINATION, text="preview nosuch-org")
@example(who="admin", where=COORDINATION, text="preview kumo-lab --week 2026-W53")
@example(who="viewer", where="C0KUMOLAB", text="send --force")
async def test_digest_commands_from_every_role(
    sandbox: Sandbox, seeded_aws: SeededAws, tally: Tally, who: str, where: str, text: str
) -> None:
    await command(sandbox, seeded_aws, tally, name="/digest", user=ROLES[who], where=where, text=text)


any_command = st.one_of(
    st.tuples(st.just("/cluster"), CLUSTER_TEXT),
    st.tuples(st.just("/track"), TRACK_TEXT),
    st.tuples(st.just("/digest"), DIGEST_TEXT),
)


@fuzz_settings(EXAMPLES["database"])
@given(who=role, where=channel, typed=any_command)
@example(who="guest", where=COORDINATION, typed=("/cluster", "status \x00"))
@example(who="operator", where="C0KUMOLAB", typed=("/track", "note a\x00b"))
@example(who="admin", where=COORDINATION, typed=("/cluster", "list \x00nosuch"))
async def test_every_command_is_audited_on_every_database(
    world_on: Sandbox, seeded_aws: SeededAws, tally: Tally, who: str, where: str, typed: tuple[str, str]
) -> None:
    """The text columns of both databases: a NUL once stopped the audit log for good on Postgres."""
    name, text = typed
    await command(world_on, seeded_aws, tally, name=name, user=ROLES[who], where=where, text=text)


# ------------------------------------------------------------------ clicks


def _drop(payload: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in keys}


@dataclass(frozen=True)
class Click:
    """A button click as Slack would send it, then mangled as `mangle` says."""

    who: str
    where: str
    action_id: str
    value: str
    mangle: str = "none"  # "no user", "no url", "no action_id", "junk action", "junk field"
    junk_key: str = ""
    junk: Any = None
    trigger: str = ""

    def body(self, world: Sandbox) -> str:
        user = ROLES[self.who]
        action: dict[str, Any] = {"action_id": self.action_id, "block_id": "b", "type": "button", "value": self.value}
        if self.mangle == "no action_id":
            del action["action_id"]
        if self.mangle == "junk action":
            action[self.junk_key or "value"] = self.junk
        token = world.slack._new_response_url(user_id=user, channel_id=self.where)  # a real, working response URL
        trigger = world.slack._trigger_id(user) if self.trigger == "valid" else self.trigger
        payload: dict[str, Any] = {
            "type": "block_actions",
            "user": {"id": user, "username": "x", "team_id": world.slack.team_id},
            "api_app_id": "A0PITCREW",
            "token": "x",
            "container": {"type": "message", "message_ts": "1.0", "channel_id": self.where, "is_ephemeral": True},
            "trigger_id": trigger,
            "team": {"id": world.slack.team_id, "domain": "pitcrew"},
            "channel": {"id": self.where, "name": "x"},
            "response_url": f"{world.slack.base_url}/response/{token}",
            "actions": [action],
        }
        if self.mangle == "no user":
            del payload["user"]
        if self.mangle == "no url":
            del payload["response_url"]
        if self.mangle == "junk field":
            payload[self.junk_key or "user"] = self.junk
        return urlencode({"payload": json.dumps(payload)})


MANGLES = ["none"] * 6 + ["no user", "no url", "no action_id", "junk action", "junk field"]
click = st.builds(
    Click,
    who=role,
    where=channel,
    action_id=st.sampled_from(ACTION_IDS),
    value=value,
    mangle=st.sampled_from(MANGLES),
    junk_key=st.sampled_from(["action_id", "value", "block_id", "user", "channel", "team", "container", "message"]),
    junk=json_junk,
    trigger=st.sampled_from(["", "1.2.3", "valid"]),
)


@fuzz_settings(EXAMPLES["clicks"])
@given(click=click)
@example(click=Click("admin", "C0KUMOLAB", ACK_ACTION, "²"))
@example(click=Click("operator", "C0KUMOLAB", ACK_ACTION, "999999999999"))
@example(click=Click("admin", "C0KUMOLAB", "alert_silence_4", "99999999999999999999"))
@example(click=Click("admin", "C0KUMOLAB", REPLACE_ACTION, "٣"))
@example(click=Click("admin", COORDINATION, CONFIRM_ACTION, "x", mangle="no user"))
@example(click=Click("admin", COORDINATION, CONFIRM_ACTION, "x", mangle="no url"))
@example(click=Click("admin", COORDINATION, CONFIRM_ACTION, "x", mangle="no action_id"))
@example(click=Click("operator", "C0KUMOLAB", TRACK_ADD_ACTION, "kumo-labs", trigger="valid"))
@example(click=Click("viewer", "C0KUMOLAB", DELETE_OPEN_ACTION, "0" * 32, trigger="valid"))
async def test_clicks_with_any_value_and_shape(
    sandbox: Sandbox, seeded_aws: SeededAws, tally: Tally, click: Click
) -> None:
    text = click.body(sandbox)

    async def send() -> None:
        await deliver(sandbox, tally, text)

    await one_example(sandbox, seeded_aws, send)


# ------------------------------------------------------------------ modal submissions


def view_body(
    callback: str,
    who: str,
    *,
    kind: str = "note",
    org: str = "kumo-labs",
    text: str = "checkpoint at 4k",
    metadata: str = '{"channel_id": "C0KUMOLAB"}',
    mangle: str = "none",
    junk: Any = None,
) -> str:
    """A modal submission as Slack sends it (both modals' inputs filled), then mangled as `mangle` says."""
    values: Any = {
        TRACK_KIND_BLOCK: {TRACK_KIND_INPUT: {"type": "static_select", "selected_option": {"value": kind}}},
        TRACK_ORG_BLOCK: {TRACK_ORG_INPUT: {"type": "static_select", "selected_option": {"value": org}}},
        TRACK_TEXT_BLOCK: {TRACK_TEXT_INPUT: {"type": "plain_text_input", "value": text}},
        DELETE_NAME_BLOCK: {DELETE_NAME_INPUT: {"type": "plain_text_input", "value": text}},
    }
    state: Any = {"values": values}
    if mangle == "state string":
        state = "values"
    if mangle == "state null":
        state = None
    if mangle == "state junk":
        state = junk
    if mangle == "values junk":
        state = {"values": junk}
    if mangle == "block junk":
        values[TRACK_KIND_BLOCK] = junk
    if mangle == "option string":
        values[TRACK_KIND_BLOCK][TRACK_KIND_INPUT]["selected_option"] = kind
    view = {
        "id": "V0FUZZ" + str(abs(hash((callback, who, kind, org, text))) % 10**8),
        "type": "modal",
        "callback_id": callback,
        "private_metadata": metadata,
        "blocks": [{"type": "input", "block_id": TRACK_TEXT_BLOCK}],
        "state": state,
    }
    payload: dict[str, Any] = {
        "type": "view_submission",
        "team": {"id": "T0PITCREW", "domain": "pitcrew"},
        "user": {"id": ROLES[who], "team_id": "T0PITCREW"},
        "view": view,
        "response_urls": [],
    }
    if mangle == "no user":
        del payload["user"]
    return urlencode({"payload": json.dumps(payload)})


texts = st.one_of(junk, controls, long_text, st.sampled_from(["checkpoint at 4k", "a\x7fb", "a\x00b", " "]))
VIEW_MANGLES = ["none"] * 6 + ["state string", "state null", "state junk", "values junk", "block junk"]
VIEW_MANGLES += ["option string", "no user"]
view_submission = st.builds(
    view_body,
    st.sampled_from([TRACK_VIEW, DELETE_VIEW, "no_such_view"]),
    role,
    kind=st.sampled_from(["note", "incident", "requirement", "", "²"]) | junk,
    org=st.sampled_from(["kumo-labs", "sakura-ai", "nosuch-org", ""]) | junk,
    text=texts,
    metadata=st.sampled_from(['{"channel_id": "C0KUMOLAB"}', '{"operation_id": "' + "0" * 32 + '"}', "", "null"])
    | junk,
    mangle=st.sampled_from(VIEW_MANGLES),
    junk=json_junk,
)


@fuzz_settings(EXAMPLES["views"])
@given(text=view_submission)
@example(text=view_body(TRACK_VIEW, "operator", mangle="state string"))
@example(text=view_body(TRACK_VIEW, "operator", mangle="state null"))
@example(text=view_body(TRACK_VIEW, "operator", mangle="state junk", junk=[1, 2]))
@example(text=view_body(TRACK_VIEW, "operator", mangle="option string"))
@example(text=view_body(TRACK_VIEW, "operator", mangle="no user"))
@example(text=view_body(DELETE_VIEW, "admin", mangle="values junk", junk="x"))
@example(text=view_body(TRACK_VIEW, "operator", text="a\x7fb"))
@example(text=view_body(TRACK_VIEW, "operator", text="a\x00b"))
@example(text=view_body(TRACK_VIEW, "admin", org="nosuch-org"))
async def test_view_submissions_of_any_state(sandbox: Sandbox, seeded_aws: SeededAws, tally: Tally, text: str) -> None:
    async def send() -> None:
        await deliver(sandbox, tally, text)

    await one_example(sandbox, seeded_aws, send)


# ------------------------------------------------------------------ raw bodies

raw_body = st.one_of(
    st.sampled_from(["", "payload=notjson", "payload=null", "payload=%5B1%2C2%5D", "payload=", "payload=%7B%7D"]),
    st.sampled_from(["payload=%7B%22type%22%3A%22block_actions%22%7D", "command=%2Fcluster", "ssl_check=1", "{}"]),
    st.sampled_from(['{"type": "event_callback"}', '{"type":"event_callback","event":[]}', "[1,2]", "null", "{"]),
    st.sampled_from(["[" * 5000, '{"type": "url_verification", "challenge": "x"}', "a=1&a=2&payload=1"]),
    st.sampled_from(["payload=%7B%22type%22%3A%22view_submission%22%2C%22user%22%3A%7B%22id%22%3A1%7D%7D"]),
    junk.map(lambda t: urlencode({"payload": t})),
    json_junk.map(lambda v: urlencode({"payload": json.dumps(v)})),
    json_junk.map(json.dumps),
    junk,
)


@fuzz_settings(EXAMPLES["raw"])
@given(text=raw_body, content_type=st.sampled_from([None, "application/json", "text/plain", ""]))
@example(text="payload=notjson", content_type=None)
@example(text="payload=null", content_type=None)
@example(text="payload=%5B1%2C2%5D", content_type=None)
@example(text="", content_type=None)
@example(text="[1,2]", content_type="application/json")
async def test_signed_bodies_that_are_no_slack_payload(
    sandbox: Sandbox, seeded_aws: SeededAws, tally: Tally, text: str, content_type: str | None
) -> None:
    async def send() -> None:
        await deliver(sandbox, tally, text, content_type=content_type)

    await one_example(sandbox, seeded_aws, send)
