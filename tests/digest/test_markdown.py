"""The exported tracking document is plain GitHub Markdown: whole, with tables that survive what people typed."""

from __future__ import annotations

from datetime import timedelta

from bot.digest.facts import HistoryEntry, RecordKind, Requirement, UsageLine
from bot.digest.markdown import tracking_doc_markdown
from tests.digest.test_render import AT, TZ, record, tracking_doc


def test_headings_and_tables() -> None:
    text = tracking_doc_markdown(tracking_doc(), tz=TZ)
    lines = text.splitlines()
    assert lines[0] == "# Kumo Labs — tracking document"
    for heading in ["## Requirements", "## Clusters now", "## Quota and usage", "## Open incidents", "## History"]:
        assert heading in lines, heading
    assert "| Requirement | Value | Set by | Set at |" in lines
    assert "| model_size | 70B | U0ALICE01 | 2026-10-26 12:00 JST |" in lines
    cluster = "| p5-train | HyperPod | InService | 16/17 | 16 x p5.48xlarge, 1 x m5.xlarge | 2026-11-25 12:00 JST |"
    assert cluster in lines
    assert "| p5.48xlarge | 16 | 16 |" in lines
    assert "| m5.xlarge | 1 | not under quota |" in lines
    assert "| p5.48xlarge | 9,000 | 10,752 | 84% |" in lines
    assert "- **#12** (opened 2026-11-25 12:00 JST by U0ALICE01): NCCL timeouts on rack 3" in lines
    # History newest first, dated, with plain user ids.
    history = lines[lines.index("## History") + 2 :]
    assert history[0] == "- 2026-11-25 12:00 JST · **incident #12** (U0ALICE01): NCCL timeouts on rack 3"
    assert history[1].startswith("- 2026-11-24 12:00 JST · **cluster change** (U0BOB0002): scale")
    assert "## Notes" in lines and "- usage counted since 2026-11-20" in lines
    assert text.endswith("\n")


def test_table_cells_escape_pipes_and_line_breaks_but_not_slack_characters() -> None:
    doc = tracking_doc(
        requirements=(Requirement("storage", "FSx | S3 <1.2 PB> & more\nsecond line", "U0ALICE01", AT),),
        usage=(UsageLine("p5|48", 1.5, quota=None, quota_hours=None, share=None),),
        open_incidents=(record(12, RecordKind.INCIDENT, "<!channel> NCCL & EFA"),),
        history=(HistoryEntry(AT, "note", "first line\nsecond <b> line", by="U0ALICE01", ref="#3"),),
    )
    text = tracking_doc_markdown(doc, tz=TZ)
    assert "| storage | FSx \\| S3 <1.2 PB> & more <br> second line | U0ALICE01 |" in text
    assert "| p5\\|48 | 1.5 | not under quota |  |" in text
    assert "&lt;" not in text and "&gt;" not in text and "&amp;" not in text
    assert "<@U0ALICE01>" not in text
    assert "<!channel> NCCL & EFA" in text
    # A multi-line history entry stays inside its list item.
    assert "- 2026-11-25 12:00 JST · **note #3** (U0ALICE01): first line\n  second <b> line" in text
    for line in text.splitlines():
        if line.startswith("|"):
            assert line.endswith("|")


def test_empty_document() -> None:
    doc = tracking_doc(
        requirements=(),
        clusters=(),
        quota={},
        held={},
        usage=(),
        open_incidents=(),
        history=(),
        notes=(),
        usage_window=(AT - timedelta(days=28), AT),
    )
    text = tracking_doc_markdown(doc, tz=TZ)
    for expected in [
        "No requirements recorded",
        "No clusters.",
        "No quota and nothing held.",
        "No instance-hours recorded.",
        "None.",
        "No history yet.",
    ]:
        assert expected in text, expected
    assert "## Notes" not in text
