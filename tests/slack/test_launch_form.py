"""The launch form's view (bot.slack.launch_form) and a confirmed plan's message (bot.slack.blocks.confirmed_plan),
as plain data: within Slack's limits, prefilled with values the templates accept, and robust to what a client
sends back."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from bot.clusters.templates import COUNT, load_templates
from bot.config import load_program
from bot.resources import example_program
from bot.slack import blocks
from bot.slack.launch_form import PARAM_PREFIX, FormMeta, default_template, field_block, launch_form

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = load_templates(ROOT / "bot" / "templates")
PROGRAM = load_program(example_program())


def test_every_orgs_form_for_every_template_is_within_slacks_limits_and_prefilled_with_usable_values() -> None:
    for org in PROGRAM.orgs:
        assert default_template(TEMPLATES, org).id == "hyperpod-p5"  # the defaults give its required parameters
        for template in TEMPLATES:
            meta = FormMeta(org_id=org.id, channel_id=org.channel, template=template.id)
            view = launch_form(TEMPLATES, org=org, template=template, meta=meta)
            assert len(view["blocks"]) <= 100 and len(view["title"]["text"]) <= 24
            assert len(view["private_metadata"]) <= 3000 and FormMeta.loads(view["private_metadata"]) == meta
            inputs = [b for b in view["blocks"] if b["type"] == "input"]
            ids = [b["block_id"] for b in inputs]
            assert len(ids) == len(set(ids))
            assert {i.removeprefix(PARAM_PREFIX) for i in ids if i.startswith(PARAM_PREFIX)} == set(
                template.parameters
            ) - {COUNT}
            for block in inputs:
                name = block["block_id"].removeprefix(PARAM_PREFIX)
                element = block["element"]
                initial = element.get("initial_value") or element.get("initial_option", {}).get("value")
                if name in template.parameters and initial is not None:
                    template.parameters[name].convert(name, initial)  # raises if a template would refuse it
                if block["block_id"].startswith(PARAM_PREFIX) and not block["optional"]:
                    assert initial is None  # required and not given: Slack asks for it


def test_reasons_go_under_the_field_they_are_about() -> None:
    assert [field_block(f) for f in (None, "template", "name", "count", "subnet_id")] == [
        "template",
        "template",
        "name",
        "count",
        "param_subnet_id",
    ]


@given(st.one_of(st.none(), st.text(max_size=200), st.integers()))
def test_private_metadata_that_is_not_the_forms_own_is_refused_not_raised(text: object) -> None:
    meta = FormMeta.loads(text)
    assert meta is None or all(isinstance(v, str) for v in (meta.org_id, meta.channel_id, meta.template))


def plan_message(operation_id: str) -> dict[str, object]:
    body = [
        blocks.header("Plan: kumo-new from hyperpod-p5"),
        blocks.section("*Quota before → after*\np5.48xlarge: held 36 + 2 → 38 of 40 allowed"),
        blocks.section("*Reserved capacity*\n:cloud: 2 x p5.48xlarge: On-Demand"),
        blocks.plan_buttons(operation_id, confirm="Confirm launch"),
        {**blocks.context("Only the requester or a program admin can confirm."), "block_id": blocks.PLAN_NOTE_BLOCK},
    ]
    return {"text": "Plan for kumo-labs/kumo-new", "blocks": body}


def test_a_confirmed_plan_keeps_every_line_but_its_buttons_and_says_who_confirmed() -> None:
    operation = SimpleNamespace(id="op1", confirmed_by="U0ALICE01", channel_id="C0KUMOLAB", kind="launch")
    reply = blocks.confirmed_plan(plan_message("op1"), operation)
    assert reply is not None and reply.public
    shown = str(reply.blocks)
    assert "Quota before" in shown and "Reserved capacity" in shown and "Plan: kumo-new" in shown
    assert "operation_confirm" not in shown and "Only the requester" not in shown
    assert "Confirmed by <@U0ALICE01>. Progress is posted below." in reply.text
    assert blocks.confirmed_plan(plan_message("another"), operation) is None  # not this operation's plan
    assert blocks.confirmed_plan({"blocks": "tampered"}, operation) is None


def test_the_audit_views_copies_of_the_forms_ids_match() -> None:
    from bot import audit_view
    from bot.slack.launch_form import LAUNCH_OPEN_ACTION, LAUNCH_VIEW

    assert (audit_view.LAUNCH_VIEW, audit_view.LAUNCH_OPEN) == (LAUNCH_VIEW, LAUNCH_OPEN_ACTION)
    entry = SimpleNamespace(
        command=LAUNCH_VIEW,
        text="launch hyperpod-p5 kumo-new --count 2",
        detail="",
        user_id="U0ALICE01",
        outcome="allowed",
        at=datetime(2026, 12, 2, tzinfo=UTC),
    )
    assert (
        "used the launch form: `launch hyperpod-p5 kumo-new --count 2`"
        in audit_view.describe(entry, tz=ZoneInfo("UTC")).what
    )
