"""Parsing of /track text: every bad input is a UsageError with a Usage line, never an exception."""

import pytest

from bot.access import Action
from bot.digest.facts import RecordKind
from bot.subcommands import UsageError
from bot.tracking.parse import (
    TRACK,
    TRACK_NEEDS,
    TRACK_SUMMARY,
    TRACK_USAGE,
    AddRecord,
    ResolveRecord,
    SetRequirements,
    ShowTrack,
    TrackDoc,
    TrackHelp,
    TrackHome,
    parse_track_command,
)
from bot.tracking.records import MAX_RECORD_TEXT

NOTE = RecordKind.NOTE


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", TrackHome()),
        ("  \n\t ", TrackHome()),
        ("help", TrackHelp()),
        ("HELP", TrackHelp()),
        ("note checkpoint restored", AddRecord(NOTE, "checkpoint restored", None)),
        ("Note   padded both ends   ", AddRecord(NOTE, "padded both ends", None)),
        (
            "note didn't converge at 4k steps; 'nan' loss -- retrying with lr/2",
            AddRecord(NOTE, "didn't converge at 4k steps; 'nan' loss -- retrying with lr/2", None),
        ),
        ('note unbalanced " quote and a \\ backslash', AddRecord(NOTE, 'unbalanced " quote and a \\ backslash', None)),
        (
            "note --verbose is prose here, and so is --org-wide",
            AddRecord(NOTE, "--verbose is prose here, and so is --org-wide", None),
        ),
        ("note --ORG is not the option", AddRecord(NOTE, "--ORG is not the option", None)),
        ("milestone 1T tokens --org Kumo-Labs", AddRecord(RecordKind.MILESTONE, "1T tokens", "kumo-labs")),
        ("incident --org kumo-labs nan at step 4200", AddRecord(RecordKind.INCIDENT, "nan at step 4200", "kumo-labs")),
        (
            "lesson pin NCCL --org kumo-labs in the image",
            AddRecord(RecordKind.LESSON, "pin NCCL in the image", "kumo-labs"),
        ),
        ("note line one\nline two\n\nline four", AddRecord(NOTE, "line one\nline two\n\nline four", None)),
        ("note line one\n--org kumo-labs\nline two", AddRecord(NOTE, "line one\nline two", "kumo-labs")),
        ("note line one --org kumo-labs\nline two", AddRecord(NOTE, "line one\nline two", "kumo-labs")),
        ("note\ttabs\tkept inside", AddRecord(NOTE, "tabs\tkept inside", None)),
        ("note 学習が収束しました 🎉", AddRecord(NOTE, "学習が収束しました 🎉", None)),
        ("note <!channel> is just text", AddRecord(NOTE, "<!channel> is just text", None)),
        ("note " + "x" * MAX_RECORD_TEXT, AddRecord(NOTE, "x" * MAX_RECORD_TEXT, None)),
        (
            'require model_size=70B framework="NeMo 2.0"',
            SetRequirements(pairs=(("model_size", "70B"), ("framework", "NeMo 2.0")), org=None),
        ),
        (
            "REQUIRE Instance_Type=ml.p5.48xlarge --org Kumo-Labs instance_count=16 deadline='2026-12-01'",
            SetRequirements(
                pairs=(("instance_type", "ml.p5.48xlarge"), ("instance_count", "16"), ("deadline", "2026-12-01")),
                org="kumo-labs",
            ),
        ),
        ("require storage=a=b", SetRequirements(pairs=(("storage", "a=b"),), org=None)),
        ("require notes='  trimmed  '", SetRequirements(pairs=(("notes", "trimmed"),), org=None)),
        (
            "require " + " ".join(f"x-k{n}=v" for n in range(20)),
            SetRequirements(pairs=tuple((f"x-k{n}", "v") for n in range(20)), org=None),
        ),
        ("require notes=" + "v" * 200, SetRequirements(pairs=(("notes", "v" * 200),), org=None)),
        ("require x-" + "k" * 38 + "=v", SetRequirements(pairs=(("x-" + "k" * 38, "v"),), org=None)),
        ("require X-Colour=blue", SetRequirements(pairs=(("x-colour", "blue"),), org=None)),
        (
            "require tokens_target=2T precision=bf16",
            SetRequirements((("tokens_target", "2T"), ("precision", "bf16")), None),
        ),
        ("resolve 12", ResolveRecord(12)),
        ("resolve #12", ResolveRecord(12)),
        ("Resolve  #007 ", ResolveRecord(7)),
        ("resolve 999999999", ResolveRecord(999_999_999)),
        ("show", ShowTrack(org=None)),
        ("show Kumo-Labs", ShowTrack(org="kumo-labs", weeks=4)),
        ("show --weeks 1", ShowTrack(org=None, weeks=1)),
        ("show --weeks 52 kumo-labs", ShowTrack(org="kumo-labs", weeks=52)),
        ("doc", TrackDoc(org=None)),
        ("DOC sakura-ai", TrackDoc(org="sakura-ai")),
    ],
)
def test_track_parses(text: str, expected: object) -> None:
    assert parse_track_command(text) == expected


@pytest.mark.parametrize(
    ("text", "message_part", "usage_part"),
    [
        ("frobnicate", "`frobnicate` is not a /track subcommand", "/track require"),
        ("requirement x=y", "`requirement` is not a /track subcommand", "/track note|milestone|incident|lesson"),
        ("<!channel> hi", "`&lt;!channel&gt;` is not a /track subcommand", "/track show"),
        ("help me", "takes no arguments", "/track help"),
        ("note", "Say what to record, e.g. `/track note", "/track note|milestone|incident|lesson TEXT"),
        ("incident   ", "Say what to record, e.g. `/track incident", "/track note"),
        ("lesson --org kumo-labs", "Say what to record", "/track note"),
        ("note done --org", "`--org` needs an org id", "/track note"),
        ("note --org a --org b text", "at most once", "/track note"),
        ("note text --org kumo-labs --org kumo-labs", "at most once", "/track note"),
        ("note text --org Bad_Org!", "`Bad_Org!` is not an org id", "/track note"),
        ("note text --org <!channel>", "`&lt;!channel&gt;` is not an org id", "/track note"),
        ("note " + "x" * 1501, "1,501 characters long; a record holds at most 1,500", "/track note"),
        ("note nul \x00 inside", "control character (U+0000)", "/track note"),
        ("milestone bell \x07", "control character (U+0007)", "/track note"),
        ("x" * 2001, "2,001 characters", "/track note"),
        ("note " + "y" * 3000, "3,005 characters", "/track show"),
        ("require", "Say which requirements to set", "/track require KEY=VALUE"),
        ("require --org kumo-labs", "Say which requirements to set", "/track require"),
        ("require framework='NeMo 2.0", "quote in that command is not closed", "/track require"),
        ('require framework="NeMo', "quote in that command is not closed", "/track require"),
        (
            "require Model-Size=70B",
            "`Model-Size` is not a requirement key: keys are lowercase letters",
            "/track require",
        ),
        ("require 1st=x", "`1st` is not a requirement key", "/track require"),
        ("require " + "k" * 41 + "=v", "is not a requirement key", "/track require"),
        ("require x-" + "k" * 39 + "=v", "is not a requirement key", "/track require"),
        ("require x-=v", "`x-` is not a requirement key", "/track require"),
        ("require colour=blue", "`colour` is not a requirement Pitcrew knows", "/track require"),
        ("require colour=blue", "write one of the org's own as `x-colour=...`", "/track require"),
        ("require model_szie=70B", "Did you mean `model_size`?", "/track require"),
        ("require k=v", "The keys are `model_size`, `framework`", "/track require"),
        ("require model_size", "`model_size` is not KEY=VALUE", "/track require"),
        ("require =70B", "is not a requirement key", "/track require"),
        ("require model_size=", "`model_size` needs a value", "/track require"),
        ("require model_size='   '", "`model_size` needs a value", "/track require"),
        ("require notes=" + "v" * 201, "201 characters long; a value is at most 200", "/track require"),
        ("require notes='two\nlines'", "control character (U+000A)", "/track require"),
        ("require model_size=70B MODEL_SIZE=175B", "`model_size` is given twice", "/track require"),
        (
            "require " + " ".join(f"x-k{n}=v" for n in range(21)),
            "sets 21 requirements; set at most 20",
            "/track require",
        ),
        ("require notes=v --org", "`--org` needs an org id", "/track require"),
        ("require notes=v --org a --org b", "at most once", "/track require"),
        ("require notes=v --org Bad_Org", "`Bad_Org` is not an org id", "/track require"),
        ("require notes=v --force", "`--force` is not an option of `/track require`", "/track require"),
        ("resolve", "needs the id of a record", "/track resolve ID"),
        ("resolve 1 2", "takes one record id", "/track resolve"),
        ("resolve #0", "`#0` is not a record id", "/track resolve"),
        ("resolve 0", "`0` is not a record id", "/track resolve"),
        ("resolve #abc", "`#abc` is not a record id", "/track resolve"),
        ("resolve ##12", "`##12` is not a record id", "/track resolve"),
        ("resolve -3", "`-3` is not a record id", "/track resolve"),
        ("resolve 1234567890", "`1234567890` is not a record id", "/track resolve"),
        ("resolve ²", "is not a record id", "/track resolve"),
        ("show --weeks 0", "from 1 to 52; got `0`", "/track show"),
        ("show --weeks 53", "from 1 to 52; got `53`", "/track show"),
        ("show --weeks", "`--weeks` takes a whole number from 1 to 52", "/track show"),
        ("show --weeks four", "got `four`", "/track show"),
        ("show --weeks ³", "from 1 to 52", "/track show"),
        ("show --weeks 2 --weeks 3", "at most once", "/track show"),
        ("show --days 3", "`--days` is not an option of `/track show`", "/track show"),
        ("show a b", "at most one org", "/track show"),
        ("show <!here>", "`&lt;!here&gt;` is not an org id", "/track show"),
        ("doc a b", "at most one org", "/track doc"),
        ("doc --weeks 2", "`--weeks` is not an option of `/track doc`", "/track doc"),
        ("doc Bad_Org", "`Bad_Org` is not an org id", "/track doc"),
    ],
)
def test_track_bad_input_says_what_and_how(text: str, message_part: str, usage_part: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_track_command(text)
    assert message_part in caught.value.message
    assert caught.value.usage.startswith("/track")
    assert usage_part in caught.value.usage
    assert "<" not in caught.value.message  # nothing quoted back can become a mention


def test_unknown_subcommand_lists_every_usage_once() -> None:
    with pytest.raises(UsageError) as caught:
        parse_track_command("frobnicate")
    lines = caught.value.usage.splitlines()
    assert lines == list(dict.fromkeys(TRACK_USAGE.values()))
    assert sum("/track note|milestone|incident|lesson" in line for line in lines) == 1


def test_tables_agree() -> None:
    assert set(TRACK_USAGE) == set(TRACK_SUMMARY) == set(TRACK_NEEDS) == set(TRACK.names)
    assert all(TRACK_USAGE[kind] == TRACK_USAGE["note"] for kind in ("milestone", "incident", "lesson"))
    assert {name for name, need in TRACK_NEEDS.items() if need is Action.OPERATE} == {
        "note",
        "milestone",
        "incident",
        "lesson",
        "require",
        "resolve",
    }
    assert TRACK_NEEDS["show"] is TRACK_NEEDS["doc"] is Action.VIEW
    assert TRACK_NEEDS["help"] is None
    assert all(usage.startswith("/track ") for usage in TRACK_USAGE.values())


def test_user_text_quoted_back_is_short_and_cannot_break_formatting() -> None:
    with pytest.raises(UsageError) as caught:
        parse_track_command("show " + "`" * 5 + "y" * 200)
    assert "``" not in caught.value.message
    assert len(caught.value.message) < 120
