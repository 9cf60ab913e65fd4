"""Poster.upload shares a chart through files_upload_v2 against the local Slack, over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import httpx
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack import charts
from bot.slack.blocks import Reply
from bot.slack.poster import Poster
from sandbox.asgi_server import serve_asgi
from sandbox.slack import LocalSlack

SECRET = "test-signing-secret"
TOKEN = "xoxb-test-token"
ALICE = "U0ALICE"
OPS, GENERAL = "C0OPS", "C0GENERAL"
UNTIL = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)


@pytest.fixture
async def slack() -> AsyncIterator[LocalSlack]:
    local = LocalSlack(
        signing_secret=SECRET,
        bot_token=TOKEN,
        users={ALICE: "Alice Smith"},
        channels={OPS: "ops", GENERAL: "general"},
    )
    async with serve_asgi(local.app) as base_url:
        local.base_url = base_url
        yield local


@pytest.fixture
async def poster(slack: LocalSlack) -> AsyncIterator[Poster]:
    # As in production: the client's base_url is SLACK_API_URL, here the local Slack's.
    one = Poster(client=AsyncWebClient(token=TOKEN, base_url=slack.api_url))
    yield one
    await one.aclose()


@pytest.fixture(scope="module")
def chart() -> bytes:
    since = UNTIL - timedelta(hours=6)
    points = [(since + timedelta(seconds=30 * i), 150_000.0 + (i % 7) * 1_000) for i in range(720)]
    return charts.throughput_chart(
        title="kumo-labs/p5-train · llama-70b · last 6 h",
        series=[charts.Series("llama-70b", points)],
        baseline=153_000,
        threshold=91_800,
        bands=[charts.Band(start=UNTIL - timedelta(minutes=30), end=None, label="slowdown")],
        since=since,
        until=UNTIL,
        tz=ZoneInfo("Asia/Tokyo"),
    )


async def served(url: str) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.get(url)


async def test_upload_into_a_channel(slack: LocalSlack, poster: Poster, chart: bytes) -> None:
    file_id = await poster.upload(channel=OPS, filename="throughput.png", content=chart, title="Throughput, last 6 h")

    assert file_id is not None and file_id in slack.files
    stored = slack.files[file_id]
    assert (stored.filename, stored.title) == ("throughput.png", "Throughput, last 6 h")
    assert stored.content == chart  # byte for byte

    message = slack.messages[-1]
    assert (message.channel, message.thread_ts, message.via, message.text) == (OPS, None, "files", "")
    assert [(f["id"], f["title"], f["filename"]) for f in message.files] == [
        (file_id, "Throughput, last 6 h", "throughput.png")
    ]
    answer = await served(message.files[0]["url"])
    assert answer.headers["content-type"] == "image/png"
    assert answer.content == chart
    # Every call, the upload's included, went to the local Slack (SLACK_API_URL), in files_upload_v2's order.
    assert [c.method for c in slack.calls] == ["files.getUploadURLExternal", "files.completeUploadExternal"]
    assert slack.calls[0].params["length"] in (len(chart), str(len(chart)))
    assert slack.channel_messages(GENERAL) == []


async def test_upload_into_a_thread_with_a_comment(slack: LocalSlack, poster: Poster, chart: bytes) -> None:
    alert_ts = await poster.post(channel=OPS, reply=Reply(text=":red_circle: Throughput slowdown on p5-train"))

    file_id = await poster.upload(
        channel=OPS,
        filename="p5-train-llama-70b-throughput.png",
        content=chart,
        title="llama-70b: throughput, baseline and threshold, last 6 h",
        thread_ts=alert_ts,
        initial_comment="Last 6 hours",
    )

    assert file_id is not None
    message = slack.messages[-1]
    assert (message.channel, message.thread_ts, message.text) == (OPS, alert_ts, "Last 6 hours")
    assert message.files[0]["id"] == file_id
    assert message.files[0]["title"] == "llama-70b: throughput, baseline and threshold, last 6 h"
    assert slack.files[file_id].content == chart
    assert (await served(message.files[0]["url"])).content == chart
    # The alert itself is untouched: the chart is a reply in its thread, not a new top-level message.
    top_level = [m for m in slack.channel_messages(OPS) if m.thread_ts is None]
    assert [m.ts for m in top_level] == [alert_ts]


async def test_two_uploads_get_two_files(slack: LocalSlack, poster: Poster, chart: bytes) -> None:
    other = charts.bar_chart(title="Instance-hours", labels=["kumo-labs"], values=[1_234.0], unit="h")
    first = await poster.upload(channel=OPS, filename="a.png", content=chart, title="A")
    second = await poster.upload(channel=OPS, filename="b.png", content=other, title="B")
    assert first != second
    assert first is not None and second is not None
    assert slack.files[first].content == chart
    assert slack.files[second].content == other


async def test_an_unknown_channel_raises_like_post(slack: LocalSlack, poster: Poster, chart: bytes) -> None:
    with pytest.raises(SlackApiError):
        await poster.upload(channel="C0NOWHERE", filename="a.png", content=chart, title="A")
    assert [m for m in slack.messages if m.files] == []


class PacingClock:
    """A monotonic clock the poster's pacing sleeps on: sleeping moves it, and each sleep is recorded."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


async def test_posts_to_one_channel_keep_the_interval_and_other_channels_do_not_wait(slack: LocalSlack) -> None:
    clock = PacingClock()
    client = AsyncWebClient(token=TOKEN, base_url=slack.api_url)
    paced = Poster(client=client, post_interval=1.0, clock=clock, sleep=clock.sleep)
    posted_at: dict[str, list[float]] = {OPS: [], GENERAL: []}
    for channel, text in [(OPS, "one"), (GENERAL, "elsewhere"), (OPS, "two"), (OPS, "three")]:
        await paced.post(channel=channel, reply=Reply(text=text))
        posted_at[channel].append(clock.now)
        clock.now += 0.25  # some work between posts: the pacing waits only for the rest of the interval
    assert clock.sleeps == [0.5, 0.75]
    assert [b - a for a, b in zip(posted_at[OPS], posted_at[OPS][1:], strict=False)] == [1.0, 1.0]
    assert [m.text for m in slack.messages] == ["one", "elsewhere", "two", "three"]


async def test_an_interval_of_zero_never_sleeps(slack: LocalSlack) -> None:
    clock = PacingClock()
    unpaced = Poster(client=AsyncWebClient(token=TOKEN, base_url=slack.api_url), post_interval=0, sleep=clock.sleep)
    for text in ("one", "two", "three"):
        await unpaced.post(channel=OPS, reply=Reply(text=text))
    assert clock.sleeps == []
    assert [m.text for m in slack.messages] == ["one", "two", "three"]
