"""manifest.yml validates against Slack's v1 manifest schema and declares our three commands."""

import json
from pathlib import Path

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[1]
# In the repository (tests/specs/README.md names its source), so a clone alone passes.
SCHEMA = ROOT / "tests" / "specs" / "slack-manifest-v1.schema.json"


def test_manifest_is_valid_and_declares_the_commands() -> None:
    manifest = yaml.safe_load((ROOT / "manifest.yml").read_text())
    jsonschema.validate(manifest, json.loads(SCHEMA.read_text()))
    commands = {item["command"] for item in manifest["features"]["slash_commands"]}
    assert commands == {"/cluster", "/track", "/digest"}
    assert {"commands", "chat:write", "files:write"} <= set(manifest["oauth_config"]["scopes"]["bot"])


def test_schema_rejects_what_it_should() -> None:
    manifest = yaml.safe_load((ROOT / "manifest.yml").read_text())
    manifest["features"]["slash_commands"][0]["command"] = "cluster"
    try:
        jsonschema.validate(manifest, json.loads(SCHEMA.read_text()))
    except jsonschema.ValidationError:
        return
    raise AssertionError("a command without a leading slash must be rejected")
