"""How a faulty node's alert and a job alert with a culprit read, which buttons they offer, and the peer
chart: the presenters and kinds alone (the monitors that open them are tested in tests/monitor)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from bot.alerts.kind import Action, AlertView, Bucket
from bot.alerts.kinds import KINDS, in_bucket
from bot.alerts.kinds import faulty as faulty_kind
from bot.alerts.kinds import job as job_kind
from bot.node_metrics.series import PeerChart, Signal
from bot.slack import charts
from bot.slack.alerts import PRESENTERS, SlackAlerts
from storage.models import Episode

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
TZ = ZoneInfo("Asia/Tokyo")
NODE = "i-0abc1234567890def"


def faulty(backend: str = "hyperpod", **changes: object) -> Episode:
    values: dict[str, object] = {
        "id": 7,
        "org_id": "kumo-labs",
        "backend": backend,
        "cluster_name": "kumo-p5-train",
        "node_key": NODE,
        "kind": faulty_kind.KIND.name,
        "state": "open",
        "node_ids": [NODE],
        "status": "thermal",
        "message": "GPU 3 at 1,210 MHz and 92 °C, peers 1,980 MHz",
        "opened_at": T0,
        "failing_since": T0 - timedelta(minutes=12),
        "updated_at": T0,
        "cause": "thermal",
        "suspects": [NODE],
        "channel_id": "C0KUMOLAB",
    }
    values.update(changes)
    return Episode(**values)


def view(row: Episode, now: datetime = T0) -> AlertView:
    kind = KINDS[row.kind]
    return AlertView(rows=(row,), org_name="Kumo Labs", tz=TZ, now=now, silence=None, actions=kind.actions([row]))


def action_ids(reply: object) -> set[str]:
    blocks = reply.blocks
    return {e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]}


def test_the_faulty_node_kind_is_registered_with_its_presenter_and_counted_in_no_digest_bucket() -> None:
    assert KINDS[faulty_kind.KIND.name] is faulty_kind.KIND
    assert faulty_kind.KIND.name in PRESENTERS
    assert all(faulty_kind.KIND.name not in in_bucket(bucket) for bucket in Bucket)


def test_an_open_faulty_node_alert_names_node_cause_and_evidence_with_the_node_buttons() -> None:
    row = faulty()
    reply = SlackAlerts().alert(faulty_kind.KIND, view(row))
    assert f"Faulty node: {NODE} of kumo-labs/kumo-p5-train (thermal)" in reply.text
    assert "GPU 3 at 1,210 MHz and 92 °C, peers 1,980 MHz" in str(reply.blocks)
    # A thermal divergence on HyperPod: Watch first (nothing has failed yet), a deep health check offered.
    assert action_ids(reply) == {
        "alert_watch",
        "alert_ack",
        "alert_check",
        "alert_replace",
        "alert_reboot",
        "alert_silence_1",
        "alert_silence_4",
        "alert_silence_24",
    }
    first = next(b["elements"][0]["action_id"] for b in reply.blocks if b["type"] == "actions")
    assert first == "alert_watch"
    line = SlackAlerts().coordination(faulty_kind.KIND, view(row), channel="C0KUMOLAB")
    assert NODE in line.text and "thermal" in line.text and "<#C0KUMOLAB>" in str(line.blocks)


def test_a_parallelcluster_faulty_node_has_no_replace_or_reboot() -> None:
    row = faulty(backend="pcluster")
    assert Action.REPLACE not in faulty_kind.KIND.actions([row])
    assert "alert_replace" not in action_ids(SlackAlerts().alert(faulty_kind.KIND, view(row)))


@pytest.mark.parametrize(
    ("status", "says"), [(faulty_kind.CLEARED, "Back in line with its peers"), (faulty_kind.LEFT, "Left the cluster")]
)
def test_a_closed_faulty_node_alert_says_why_and_has_no_buttons(status: str, says: str) -> None:
    row = faulty(state="closed", status=status, closed_at=T0 + timedelta(minutes=20))
    reply = SlackAlerts().alert(faulty_kind.KIND, view(row, now=T0 + timedelta(hours=1)))
    assert reply.text.startswith(f"{says} after 32 min")
    assert not action_ids(reply)


def test_a_job_alert_offers_replace_and_reboot_only_for_the_node_its_episode_acts_on() -> None:
    job = Episode(
        id=9,
        org_id="kumo-labs",
        backend=job_kind.SOURCE,
        cluster_name="kumo-p5-train",
        node_key="llama-70b",
        kind=job_kind.KIND.name,
        state="open",
        node_ids=[],
        status="slowdown",
        message="Now 190,000 tokens/s. Likely culprit: `i-0abc`, GPU 3 at 1,210 MHz (thermal).",
        opened_at=T0,
        updated_at=T0,
        cause="thermal",
        suspects=["i-0abc"],
    )
    assert action_ids(SlackAlerts().alert(job_kind.KIND, view(job))) == {
        "alert_ack",
        "alert_silence_1",
        "alert_silence_4",
        "alert_silence_24",
    }
    job.node_ids = ["i-0abc"]  # the monitor sets it on HyperPod only
    reply = SlackAlerts().alert(job_kind.KIND, view(job))
    assert {"alert_replace", "alert_reboot"} <= action_ids(reply)
    assert "Likely culprit: `i-0abc`" in str(reply.blocks)


def peer(n: int, *, suspect: float = 1210.0, peers: float = 1980.0) -> PeerChart:
    times = tuple(T0.timestamp() + 30.0 * i for i in range(n))
    return PeerChart(
        signal=Signal.SM_CLOCK,
        title="SM clock of GPU 3 (MHz)",
        node=NODE,
        times=times,
        suspect=tuple(suspect for _ in times),
        peers_median=tuple(peers for _ in times),
    )


def test_the_peer_chart_is_a_png_of_the_usual_size_with_the_suspect_and_its_peers() -> None:
    content = charts.peer_chart(peer(120), tz=TZ)
    image = Image.open(io.BytesIO(content))
    assert image.format == "PNG" and image.size == (charts.WIDTH_PX, charts.HEIGHT_PX)
    fig = charts.peer_figure(peer(120), tz=TZ)
    (ax,) = fig.axes
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == [NODE, "peers' median"]
    assert ax.get_ylabel() == "MHz"
    assert ax.get_ylim()[1] >= 1980.0


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=40),
    suspect=st.floats(min_value=-50, max_value=1e6, allow_nan=False),
    peers=st.floats(min_value=0, max_value=1e6, allow_nan=False),
)
def test_any_peer_chart_renders(n: int, suspect: float, peers: float) -> None:
    assert charts.peer_chart(peer(n, suspect=suspect, peers=peers), tz=TZ).startswith(b"\x89PNG")


def test_a_peer_chart_of_mismatched_lengths_is_refused_in_one_sentence() -> None:
    broken = PeerChart(Signal.GPU_TEMP, "GPU temperature (°C)", NODE, (1.0, 2.0), (80.0,), (60.0, 61.0))
    with pytest.raises(ValueError, match="as many values"):
        charts.peer_chart(broken, tz=TZ)
