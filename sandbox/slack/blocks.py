"""What Slack checks in what it is sent: Block Kit blocks, modal views, and the bodies of response URL posts."""

import hashlib
import json
from typing import Any
from urllib.parse import parse_qsl

from sandbox.slack.workspace import (
    MODAL_BLOCKS_MAX,
    MODAL_TEXT_MAX,
    PRIVATE_METADATA_MAX,
    VIEW_ID_FIELD_MAX,
    SlackApiFailure,
)


def parse_json_value(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() in ("true", "1"))


def as_blocks(value: Any) -> list[dict[str, Any]]:
    try:
        return parse_blocks(value, limit=100)
    except SlackApiFailure:
        return []


def parse_blocks(value: Any, *, limit: int) -> list[dict[str, Any]]:
    """Blocks from a list or a JSON string, checked against the Block Kit limits Slack enforces."""
    if value is None or value == "":
        return []
    blocks = parse_json_value(value)
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        raise SlackApiFailure("invalid_blocks", errors=["blocks must be a JSON array of objects"])
    errors = block_errors(blocks, limit=limit)
    if errors:
        raise SlackApiFailure("invalid_blocks", errors=errors)
    return blocks


def text_of(obj: Any) -> str:
    if isinstance(obj, dict):
        return str(obj.get("text", ""))
    return ""


def block_errors(blocks: list[dict[str, Any]], *, limit: int) -> list[str]:
    """The subset of Slack's Block Kit validation that catches the usual mistakes (see docs limits)."""
    errors: list[str] = []
    if len(blocks) > limit:
        errors.append(f"no more than {limit} items allowed [json-pointer:/blocks]")

    def check(cond: bool, message: str, pointer: str) -> None:
        if not cond:
            errors.append(f"{message} [json-pointer:{pointer}]")

    for i, block in enumerate(blocks):
        at = f"/blocks/{i}"
        kind = block.get("type")
        check(isinstance(kind, str), "missing required field: type", at)
        if "block_id" in block:
            check(len(str(block["block_id"])) <= 255, "must be less than 256 characters", f"{at}/block_id")
        if kind == "header":
            check(0 < len(text_of(block.get("text"))) <= 150, "must be 1-150 characters", f"{at}/text/text")
        elif kind == "section":
            text, fields = block.get("text"), block.get("fields")
            check(text is not None or bool(fields), "must provide text or fields", at)
            check(len(text_of(text)) <= 3000, "must be less than 3001 characters", f"{at}/text/text")
            if fields is not None:
                check(
                    isinstance(fields, list) and len(fields) <= 10,
                    "no more than 10 items allowed",
                    f"{at}/fields",
                )
            if isinstance(block.get("accessory"), dict):
                errors.extend(element_errors(block["accessory"], f"{at}/accessory"))
        elif kind == "actions":
            elements = block.get("elements")
            check(
                isinstance(elements, list) and 0 < len(elements) <= 25,
                "must have 1-25 elements",
                f"{at}/elements",
            )
            for j, element in enumerate(elements if isinstance(elements, list) else []):
                errors.extend(element_errors(element, f"{at}/elements/{j}"))
        elif kind == "context":
            elements = block.get("elements")
            check(
                isinstance(elements, list) and 0 < len(elements) <= 10,
                "must have 1-10 elements",
                f"{at}/elements",
            )
        elif kind == "input":
            check(0 < len(text_of(block.get("label"))) <= 2000, "must be 1-2000 characters", f"{at}/label/text")
            element = block.get("element")
            if isinstance(element, dict) and isinstance(element.get("type"), str):
                errors.extend(element_errors(element, f"{at}/element"))
            else:
                errors.append(f"missing required field: element [json-pointer:{at}]")
        elif kind == "image":
            check(bool(block.get("image_url") or block.get("slack_file")), "missing image_url", at)
            check(bool(block.get("alt_text")), "missing required field: alt_text", at)
    return errors


def error_messages(errors: list[str]) -> dict[str, list[str]]:
    """Slack's `response_metadata` for invalid_arguments: one "[ERROR] ..." line per problem."""
    return {"messages": [f"[ERROR] {e}" for e in errors]}


def modal_content(value: Any) -> dict[str, Any]:
    """The fields of a modal view object as Slack keeps them, or invalid_arguments with Slack's messages."""
    view = parse_json_value(value)
    if not isinstance(view, dict):
        problem = "missing required field: view" if value is None else "must be a JSON object [json-pointer:/view]"
        raise SlackApiFailure("invalid_arguments", response_metadata=error_messages([problem]))
    errors = modal_errors(view)
    if errors:
        raise SlackApiFailure("invalid_arguments", response_metadata=error_messages(errors))
    return {
        "type": "modal",
        "title": view["title"],
        "submit": view.get("submit"),
        "close": view.get("close"),
        "blocks": with_ids(view["blocks"]),
        "private_metadata": str(view.get("private_metadata") or ""),
        "callback_id": str(view.get("callback_id") or ""),
        "external_id": str(view.get("external_id") or ""),
        "clear_on_close": truthy(view.get("clear_on_close")),
        "notify_on_close": truthy(view.get("notify_on_close")),
    }


def modal_errors(view: dict[str, Any]) -> list[str]:
    """What Slack rejects in a modal view object (limits from the view reference), json-pointers under /view."""
    errors: list[str] = []
    if view.get("type") != "modal":
        errors.append("must be modal [json-pointer:/view/type]")
    for key, required in (("title", True), ("submit", False), ("close", False)):
        text = view.get(key)
        if text is None:
            if required:
                errors.append(f"missing required field: {key} [json-pointer:/view]")
        elif not isinstance(text, dict) or text.get("type") != "plain_text":
            errors.append(f"must be a plain_text text object [json-pointer:/view/{key}]")
        elif not 0 < len(text_of(text)) <= MODAL_TEXT_MAX:
            errors.append(f"must be 1-{MODAL_TEXT_MAX} characters [json-pointer:/view/{key}/text]")
    for key, limit in (
        ("callback_id", VIEW_ID_FIELD_MAX),
        ("external_id", VIEW_ID_FIELD_MAX),
        ("private_metadata", PRIVATE_METADATA_MAX),
    ):
        if len(str(view.get(key) or "")) > limit:
            errors.append(f"must be less than {limit + 1} characters [json-pointer:/view/{key}]")
    blocks = view.get("blocks")
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        errors.append("missing required field: blocks [json-pointer:/view]")
        return errors
    errors.extend(
        e.replace("[json-pointer:/blocks", "[json-pointer:/view/blocks")
        for e in block_errors(blocks, limit=MODAL_BLOCKS_MAX)
    )
    seen: set[str] = set()
    for i, block in enumerate(blocks):
        if "block_id" in block:
            if str(block["block_id"]) in seen:
                errors.append(f"duplicate block_id [json-pointer:/view/blocks/{i}/block_id]")
            seen.add(str(block["block_id"]))
    if view.get("submit") is None and any(b.get("type") == "input" for b in blocks):
        errors.append("must provide submit when the view has input blocks [json-pointer:/view/submit]")
    return errors


def with_ids(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Blocks as Slack returns them: every block has a block_id and every input element an action_id.

    Slack makes up random ids; these are derived from the content instead, so tests are repeatable and an
    unchanged block in the same place keeps its id (and what was typed in it) across views.update.
    """

    def derived(index: int, obj: dict[str, Any]) -> str:
        return hashlib.sha1(json.dumps([index, obj], sort_keys=True).encode()).hexdigest()[:5]

    result = []
    for index, block in enumerate(blocks):
        block = dict(block)
        block.setdefault("block_id", derived(index, block))
        element = block.get("element")
        if block.get("type") == "input" and isinstance(element, dict) and "action_id" not in element:
            block["element"] = {**element, "action_id": derived(index, element)}
        result.append(block)
    return result


def element_errors(element: Any, at: str) -> list[str]:
    if not isinstance(element, dict):
        return [f"must be an object [json-pointer:{at}]"]
    errors = []
    if element.get("type") == "button":
        if not 0 < len(text_of(element.get("text"))) <= 75:
            errors.append(f"must be 1-75 characters [json-pointer:{at}/text/text]")
        if len(str(element.get("value", ""))) > 2000:
            errors.append(f"must be less than 2001 characters [json-pointer:{at}/value]")
    if len(str(element.get("action_id", ""))) > 255:
        errors.append(f"must be less than 256 characters [json-pointer:{at}/action_id]")
    return errors


def parse_response_body(raw: bytes, content_type: str) -> dict[str, Any]:
    text = raw.decode("utf-8", "replace")
    if "x-www-form-urlencoded" in content_type:
        form = dict(parse_qsl(text, keep_blank_values=True))
        text = form.get("payload", "")
    try:
        parsed = json.loads(text) if text else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
