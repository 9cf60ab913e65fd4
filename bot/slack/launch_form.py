"""The launch form: a modal with the template, the name, the count and the template's parameters, prefilled from
the org's launch defaults (orgs[].launch) and the template's own. Its submission is planned like
`/cluster launch TEMPLATE NAME ...` (handlers.views.launch); what is wrong is shown under its field.

Pure: view JSON in, view JSON out. Slack's limits respected here: a modal title of 24 characters, labels of
2000, hints of 2000, initial values of 3000, 100 blocks (a template declares at most a dozen parameters)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot import mrkdwn
from bot.clusters.templates import COUNT, Parameter, Template, TemplateSet
from bot.config import OrgConfig

LAUNCH_OPEN_ACTION = "launch_open"  # the Home tab's "Launch…" button; its value is the org id
LAUNCH_VIEW = "launch_form"  # the modal's callback_id
TEMPLATE_BLOCK, NAME_BLOCK, COUNT_BLOCK = "template", "name", COUNT
PARAM_PREFIX = "param_"  # a parameter's block id is PARAM_PREFIX + its name
VALUE = "value"  # every input's action_id
MAX_VALUE = 2048  # the longest a template parameter may be (an ARN); Slack takes up to 3000


def param_block(name: str) -> str:
    return PARAM_PREFIX + name


def field_block(field: str | None) -> str:
    """The block a reason about `field` is shown under (bot.clusters.changes.NotPlanned.field)."""
    if field in (None, TEMPLATE_BLOCK):
        return TEMPLATE_BLOCK
    if field in (NAME_BLOCK, COUNT):
        return str(field)
    return param_block(str(field))


def form_errors(problems: Mapping[str | None, str], template: Template) -> dict[str, str]:
    """Each problem under its field's block (bot.clusters.templates.launch_problems), all at once; one that is
    about no field of this template's form goes under the template."""
    errors: dict[str, list[str]] = {}
    for field, message in problems.items():
        block = field_block(field)
        if block.startswith(PARAM_PREFIX) and block.removeprefix(PARAM_PREFIX) not in template.parameters:
            block = TEMPLATE_BLOCK
        errors.setdefault(block, []).append(message)
    return {block: " ".join(messages) for block, messages in errors.items()}


@dataclass(frozen=True)
class FormMeta:
    """What the modal carries from its opening to its submission (private_metadata)."""

    org_id: str
    channel_id: str  # where it was opened from ("" from the Home tab)
    template: str  # the template whose parameters are shown

    def dumps(self) -> str:
        return json.dumps({"org_id": self.org_id, "channel_id": self.channel_id, "template": self.template})

    @classmethod
    def loads(cls, text: Any) -> FormMeta | None:
        try:
            data = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        values = [data.get(key) for key in ("org_id", "channel_id", "template")]
        if not all(isinstance(value, str) for value in values):
            return None
        org_id, channel_id, template = (str(value)[:80] for value in values)
        return cls(org_id=org_id, channel_id=channel_id, template=template)


def default_template(templates: TemplateSet, org: OrgConfig) -> Template:
    """The template the form opens with: the first one all of whose required parameters the org's defaults
    give (a HyperPod org with an execution role, say), else the first."""
    for template in templates:
        needed = [n for n, p in template.parameters.items() if p.required and p.default is None]
        if all(name in org.launch for name in needed):
            return template
    return templates.templates[0]


def _plain(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": mrkdwn.cut(text, limit) or " "}


def _option(text: str, value: str) -> dict[str, Any]:
    return {"text": _plain(text, 75), "value": value}


def _initial(name: str, spec: Parameter, org: OrgConfig, typed: Mapping[str, str]) -> str | None:
    if name in typed:
        return typed[name] or None
    value = org.launch.get(name, spec.default)
    return None if value is None else str(value)


def _parameter_block(name: str, spec: Parameter, org: OrgConfig, typed: Mapping[str, str]) -> dict[str, Any]:
    initial = _initial(name, spec, org, typed)
    element: dict[str, Any]
    if spec.type == "enum":
        options = [_option(choice, choice) for choice in spec.choices or ()]
        element = {"type": "static_select", "action_id": VALUE, "options": options}
        chosen = next((o for o in options if o["value"] == initial), None)
        if chosen is not None:
            element["initial_option"] = chosen
    else:
        element = {"type": "plain_text_input", "action_id": VALUE, "max_length": MAX_VALUE}
        if initial is not None:
            element["initial_value"] = initial[:MAX_VALUE]
        if spec.example:
            element["placeholder"] = _plain(spec.example, 150)
    source = " (this org's default)" if name in org.launch and name not in typed else ""
    return {
        "type": "input",
        "block_id": param_block(name),
        "optional": not spec.required or initial is not None,
        "label": _plain(name, 2000),
        "hint": _plain(spec.description + source, 2000),
        "element": element,
    }


def launch_form(
    templates: TemplateSet,
    *,
    org: OrgConfig,
    template: Template,
    meta: FormMeta,
    typed: Mapping[str, str] | None = None,
    note: str = "",
) -> dict[str, Any]:
    """The modal for `template`; `typed`: what was typed already (name, count and parameters by name), kept
    when the form is shown again for another template."""
    typed = dict(typed or {})
    options = [_option(f"{t.id} · {t.description}", t.id) for t in templates]
    chosen = next(o for o in options if o["value"] == template.id)
    count_spec = template.parameters.get(COUNT)
    count = typed.get(COUNT) or (
        str(org.launch.get(COUNT, count_spec.default if count_spec else "")) if count_spec else ""
    )
    intro = (
        f"A new cluster for *{mrkdwn.escape(org.name)}* (`{org.id}`). *Plan launch* shows the plan (request, quota, "
        "cost) with Confirm, as `/cluster launch` does; nothing is created before Confirm."
    )
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": intro}}]
    if note:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": mrkdwn.cut(note, 2000)}]})
    name_element: dict[str, Any] = {"type": "plain_text_input", "action_id": VALUE, "max_length": 63}
    if typed.get(NAME_BLOCK):
        name_element["initial_value"] = typed[NAME_BLOCK]
    name_element["placeholder"] = _plain(f"{org.id.split('-')[0]}-new", 150)
    count_element: dict[str, Any] = {"type": "plain_text_input", "action_id": VALUE, "max_length": 6}
    if count:
        count_element["initial_value"] = count
    hint = count_spec.description if count_spec else "Nodes of the accelerated group."
    blocks += [
        {
            "type": "input",
            "block_id": TEMPLATE_BLOCK,
            "label": _plain("Template", 2000),
            "hint": _plain("Choosing another template shows its parameters when you press Plan launch.", 2000),
            "element": {"type": "static_select", "action_id": VALUE, "options": options, "initial_option": chosen},
        },
        {
            "type": "input",
            "block_id": NAME_BLOCK,
            "label": _plain("Cluster name", 2000),
            "hint": _plain("Letters, digits and hyphens, starting with a letter or digit.", 2000),
            "element": name_element,
        },
        {
            "type": "input",
            "block_id": COUNT_BLOCK,
            "label": _plain("Count", 2000),
            "hint": _plain(hint, 2000),
            "element": count_element,
        },
    ]
    blocks += [_parameter_block(name, spec, org, typed) for name, spec in template.parameters.items() if name != COUNT]
    return {
        "type": "modal",
        "callback_id": LAUNCH_VIEW,
        "private_metadata": meta.dumps(),
        "title": _plain("Launch a cluster", 24),
        "submit": _plain("Plan launch", 24),
        "close": _plain("Cancel", 24),
        "blocks": blocks,
    }


def refusal_view(reason: str) -> dict[str, Any]:
    """A modal saying why no form opens (from the Home tab there is no channel to answer in)."""
    return {
        "type": "modal",
        "title": _plain("Launch a cluster", 24),
        "close": _plain("Close", 24),
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn.cut(reason, 3000)}}],
    }
