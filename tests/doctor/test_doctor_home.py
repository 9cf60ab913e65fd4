"""The Home shows admins an org whose last doctor run failed, and stops once a run passes."""

from __future__ import annotations

import pytest

from sandbox.world import Sandbox
from tests.doctor.test_doctor_sandbox import SAKURA, onboarded, without_pitcrew
from tests.scenarios.conftest import ADMIN, ask, body
from tests.scenarios.test_home import open_home, text_of

ALICE = "U0ALICE01"


async def test_the_home_shows_an_org_whose_last_run_failed(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    await onboarded(sandbox)
    with monkeypatch.context() as patched:
        without_pitcrew(sandbox, patched, SAKURA)
        await ask(sandbox, user=ADMIN, channel="C0PROGRAM", text="doctor")
    home = text_of(await open_home(sandbox, ADMIN))
    assert "Setup problem at the last doctor run" in home and "Pitcrew is not in #sakura-ai" in home
    assert "`/cluster doctor sakura-ai`" in home
    assert "Setup problem" not in text_of(await open_home(sandbox, ALICE)), "members are not shown the setup"
    again = await ask(sandbox, user=ADMIN, channel="C0PROGRAM", text="doctor sakura-ai")
    assert "every check passed" in body(again)
    assert "Setup problem" not in text_of(await open_home(sandbox, ADMIN)), "fixed: the line goes"
