"""/cluster audit: operators see their org's log, admins any org's, viewers and strangers are refused."""

from __future__ import annotations

from bot.sandbox.world import Sandbox
from tests.scenarios.conftest import ADMIN, COORDINATION, ask, body

ALICE, BOB, HANA = "U0ALICE01", "U0BOB0001", "U0HANA001"
KUMO = "C0KUMOLAB"


async def test_operator_sees_their_orgs_audit(sandbox: Sandbox) -> None:
    await ask(sandbox, user=ALICE, channel=KUMO, text="list")
    await ask(sandbox, user=BOB, channel=KUMO, text="frobnicate")
    await ask(sandbox, user=HANA, channel="C0SAKURA1", text="list")
    reply = await ask(sandbox, user=ALICE, channel=KUMO, text="audit --days 1")
    text = body(reply)
    assert "Audit · `kumo-labs` · last 1 day" in text
    assert "<@U0ALICE01>" in text and "`/cluster list`" in text and "*allowed*" in text
    assert "U0HANA001" not in text  # another org's entries stay in that org


async def test_admin_sees_every_org_and_others_are_refused(sandbox: Sandbox) -> None:
    await ask(sandbox, user=HANA, channel="C0SAKURA1", text="list")
    everything = await ask(sandbox, user=ADMIN, channel=COORDINATION, text="audit")
    assert "every org" in body(everything) and "U0HANA001" in body(everything)
    viewer = await ask(sandbox, user=BOB, channel=KUMO, text="audit")
    assert "this needs operator" in body(viewer)
    stranger = await ask(sandbox, user=HANA, channel=KUMO, text="audit kumo-labs")
    assert "no access to org `kumo-labs`" in body(stranger)
    bad = await ask(sandbox, user=ALICE, channel=KUMO, text="audit --days 1000")
    assert "Usage: /cluster audit" in bad.text
