"""A log's items turned into the rows of a throughput trace (the ingest API's sample keys), and what was assumed.

Runs: a run begins at a `start` mark, after an `end` mark, or where the step goes back (a restart from a
checkpoint); lines of one step (several ranks, a progress bar redrawn, a step line and its timer line) are one
sample. Times: the line's own timestamp; else the progress bar's elapsed time since its run began; else the
previous sample's time plus the steps since it x the step time. A log with no timestamp at all is placed after
`--start`, or so that its last step ends when the file was last changed. Rates: the log's own tokens/s; else
tokens per step (`--tokens-per-step`, or the global batch size x the sequence length the log prints) / the step
time; else samples/s (the global batch size / the step time, or the log's own figure). One unit for the whole
file: the detector compares a job with its own baseline.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from bot.ingest.training_logs.common import Item, LogError, LogFormat, Mark, Progress, Setting, iso


@dataclass(frozen=True, kw_only=True)
class ImportOptions:
    org: str
    cluster: str
    job: str
    tokens_per_step: float | None = None  # --tokens-per-step
    start: datetime | None = None  # --start: when the first step began, for a log without timestamps
    last_change: datetime | None = None  # the file's last change: where a log without timestamps ends (no --start)


@dataclass(frozen=True)
class Imported:
    columns: tuple[str, ...]  # ts, org, cluster, job, tokens_per_second|samples_per_second, step, event
    rows: list[dict[str, str]]
    notes: list[str]  # what was read and assumed, one sentence each


@dataclass(kw_only=True)
class _Run:
    start: Mark | None
    settings: dict[str, float]
    steps: list[Progress] = field(default_factory=list)
    end: Mark | None = None


@dataclass(frozen=True, kw_only=True)
class _Placed:
    progress: Progress
    at: float  # seconds: since the epoch once anchored
    step_seconds: float | None
    samples_per_step: float | None
    seq_length: float | None  # tokens per sample, where the log prints it


def convert(items: Iterable[Item], fmt: LogFormat, options: ImportOptions) -> Imported:
    runs = _runs(items)
    progress = [p for run in runs for p in run.steps]
    if not progress:
        raise LogError(None, f"no line reads as {fmt.label} progress (like `{fmt.example}`): is --format right?")
    lines = "line" if len(progress) == 1 else "lines"
    notes = [f"read {len(progress)} {fmt.label} progress {lines} (lines {progress[0].line}-{progress[-1].line})"]
    if len(runs) > 1:
        starts = ", ".join(str(run.steps[0].line) for run in runs[1:])
        notes.append(f"{len(runs)} runs: training starts again at line{'s' if len(runs) > 2 else ''} {starts}")
    placed, skipped = _place(runs, options, notes)
    unit, values, rate_notes = _rates(placed, fmt, options)
    notes += rate_notes
    kept = sum(value is not None for run in values for value in run)
    left_out = skipped + sum(len(run) for run in placed) - kept
    if left_out:
        lines = "line" if left_out == 1 else "lines"
        notes.append(f"{left_out} progress {lines} left out: no time or no {unit.replace('_', ' ')} could be read")
    rows = _rows(runs, placed, values, unit, options)
    if runs[-1].end is not None:
        notes.append(f"training finished at line {runs[-1].end.line}: an end row follows the last sample")
    else:
        notes.append(
            "the log ends without saying training finished: replay it with --until end+30m to see whether it hung"
        )
    return Imported(columns=("ts", "org", "cluster", "job", unit, "step", "event"), rows=rows, notes=notes)


def _runs(items: Iterable[Item]) -> list[_Run]:
    runs: list[_Run] = []
    settings: dict[str, float] = {}
    current: _Run | None = None
    for item in items:
        if isinstance(item, Setting):
            settings[item.name] = item.value
            if current is not None:  # printed after the run's steps (a summary) counts for it too
                current.settings[item.name] = item.value
        elif isinstance(item, Mark):
            if item.kind == "start":
                current = _Run(start=item, settings=dict(settings))
                runs.append(current)
            elif current is not None and current.steps and current.end is None:
                current.end = item
        else:
            last = current.steps[-1] if current is not None and current.steps else None
            went_back = last is not None and (_between(last, item) or 0) < 0
            if current is None or current.end is not None or went_back:
                current = _Run(start=None, settings=dict(settings))
                runs.append(current)
                last = None
            if last is not None and item.step is not None and item.step == last.step:
                current.steps[-1] = _merge(last, item)  # another rank, a redrawn bar, a step's timer line
            else:
                current.steps.append(item)
    return [run for run in runs if run.steps]


def _between(before: Progress, after: Progress) -> int | None:
    """Steps from one line to a later one, where both say their step."""
    return None if before.step is None or after.step is None else after.step - before.step


def _merge(first: Progress, then: Progress) -> Progress:
    missing = {
        name: getattr(then, name)
        for name in (f.name for f in dataclasses.fields(Progress))
        if getattr(first, name) is None and getattr(then, name) is not None
    }
    return dataclasses.replace(first, **missing)


def _samples_per_step(progress: Progress, previous: Progress | None, run: _Run) -> float | None:
    if progress.samples_per_step is not None:
        return progress.samples_per_step
    if previous is not None and progress.consumed_samples is not None and previous.consumed_samples is not None:
        steps, grown = _between(previous, progress), progress.consumed_samples - previous.consumed_samples
        if steps and steps > 0 and grown > 0:
            return grown / steps
    return run.settings.get("samples_per_step")


def _place(runs: list[_Run], options: ImportOptions, notes: list[str]) -> tuple[list[list[_Placed]], int]:
    """Each run's samples with a time (seconds; relative to the log's start until anchored), and how many had none."""
    anchored = any(p.at is not None for run in runs for p in run.steps) or any(
        mark is not None and mark.at is not None for run in runs for mark in (run.start, run.end)
    )
    clock: float | None = None if anchored else 0.0
    sources: set[str] = set()
    placed: list[list[_Placed]] = []
    skipped = 0
    for run in runs:
        if run.start is not None and run.start.at is not None:
            clock = run.start.at.timestamp()
        origin = clock  # where a progress bar's elapsed time counts from
        deltas = _step_deltas(run.steps)
        kept: list[_Placed] = []
        previous: Progress | None = None
        for progress, delta in zip(run.steps, deltas, strict=True):
            per_step = _samples_per_step(progress, previous, run)
            seconds = progress.step_seconds
            if seconds is None and per_step and progress.samples_per_second:
                seconds = per_step / progress.samples_per_second
            at: float | None = None
            if progress.at is not None:
                at, source = progress.at.timestamp(), "stamp"
            elif progress.elapsed is not None and origin is not None:
                at, source = origin + progress.elapsed.total_seconds(), "elapsed"
            elif clock is not None and delta is not None and seconds is not None:
                at, source = clock + delta * seconds, "steps"
            previous = progress
            if at is None:
                skipped += 1
                continue
            sources.add(source)
            at = at if clock is None else max(at, clock)  # ranks' clocks differ a little: rows stay in order
            steps = _between(kept[-1].progress, progress) if kept else None
            if seconds is None and steps and at > kept[-1].at:  # timed step numbers: the time between them
                seconds = (at - kept[-1].at) / steps
            clock = at
            kept.append(
                _Placed(
                    progress=progress,
                    at=at,
                    step_seconds=seconds,
                    samples_per_step=per_step,
                    seq_length=run.settings.get("seq_length"),
                )
            )
        if run.end is not None and run.end.at is not None and clock is not None:
            clock = max(clock, run.end.at.timestamp())
        placed.append(kept)
    if anchored:
        zoned = all(p.zoned for run in runs for p in run.steps if p.at is not None)
        how = "times from the log's timestamps" + ("" if zoned else ", read as UTC (the log names no time zone)")
        if "elapsed" in sources or "steps" in sources:
            how += "; lines without one placed by the step times since the last"
        notes.append(how)
        if options.start is not None:
            notes.append("--start not used: the log has its own timestamps")
        return placed, skipped
    end = max((p.at for run in placed for p in run), default=0.0)
    how = " and ".join(
        text
        for source, text in (("elapsed", "the progress bar's elapsed time"), ("steps", "cumulative step times"))
        if source in sources
    )
    if options.start is not None:
        shift = options.start.timestamp()
        notes.append(f"no timestamps: times from {how} after {iso(options.start)} (--start)")
    elif options.last_change is not None:
        shift = options.last_change.timestamp() - end
        first = datetime.fromtimestamp(shift, UTC)
        notes.append(
            f"no timestamps: times from {how}, the last step ending when the file was last changed "
            f"({iso(options.last_change)}), so the first began {iso(first)}; give --start TIME to place it"
        )
    else:
        raise LogError(None, "the log has no timestamps: give --start TIME (when its first step began)")
    if len(runs) > 1:
        notes.append("without timestamps a restart follows the run before it at once (its downtime is unknown)")
    return [[dataclasses.replace(p, at=p.at + shift) for p in run] for run in placed], skipped


def _step_deltas(steps: list[Progress]) -> list[int | None]:
    """Steps since the line before, per line; the first of a run takes the log interval (the next line's, or 1)."""
    deltas = [None, *(_between(before, after) for before, after in itertools.pairwise(steps))]
    deltas[0] = deltas[1] if len(deltas) > 1 and deltas[1] is not None else 1
    return deltas


def _rates(
    placed: list[list[_Placed]], fmt: LogFormat, options: ImportOptions
) -> tuple[str, list[list[float | None]], list[str]]:
    """The unit, each sample's rate in it (None: not readable in it), and notes on where the rates came from."""
    tokens: list[list[float | None]] = []
    samples: list[list[float | None]] = []
    used: set[str] = set()
    for run in placed:
        run_tokens: list[float | None] = []
        run_samples: list[float | None] = []
        for sample in run:
            progress, seconds, per_step = sample.progress, sample.step_seconds, sample.samples_per_step
            tokens_per_step = options.tokens_per_step
            if tokens_per_step is None and per_step and sample.seq_length:
                tokens_per_step = per_step * sample.seq_length
            value: float | None = None
            if progress.tokens_per_second is not None:
                value = progress.tokens_per_second
                used.add("own")
            elif tokens_per_step and seconds:
                value = tokens_per_step / seconds
                used.add("per_step")
            elif tokens_per_step and per_step and progress.samples_per_second:
                value = progress.samples_per_second * tokens_per_step / per_step
                used.add("per_step")
            run_tokens.append(value)
            if progress.samples_per_second is not None:
                run_samples.append(progress.samples_per_second)
                used.add("own_samples")
            elif per_step and seconds:
                run_samples.append(per_step / seconds)
                used.add("batch")
            else:
                run_samples.append(None)
        tokens.append(run_tokens)
        samples.append(run_samples)
    token_count = sum(v is not None for run in tokens for v in run)
    sample_count = sum(v is not None for run in samples for v in run)
    notes: list[str] = []
    if token_count and token_count >= sample_count:
        if "own" in used:
            notes.append(f"tokens/s from the log's own figure ({fmt.tokens_figure or 'tokens per second'})")
            if options.tokens_per_step is not None:
                notes.append("--tokens-per-step not used where the log gives tokens/s itself")
        if "per_step" in used:
            if options.tokens_per_step is not None:
                notes.append(f"tokens per step from --tokens-per-step ({options.tokens_per_step:g}) over the step time")
            else:
                notes.append("tokens per step = the global batch size x the sequence length the log prints")
        return "tokens_per_second", tokens, notes
    if sample_count:
        sources = [
            text
            for name, text in (("own_samples", "the log's own figure"), ("batch", "the global batch size / step time"))
            if name in used
        ]
        notes.append(
            f"samples/s ({' and '.join(sources)}): no tokens per step known; give --tokens-per-step N for tokens/s"
        )
        if options.tokens_per_step is not None:
            notes.append("--tokens-per-step not used: the log gives neither the step time nor the batch size")
        return "samples_per_second", samples, notes
    if any(sample.step_seconds for run in placed for sample in run):
        raise LogError(
            None,
            "the log says how long a step takes but not how many samples or tokens a step holds: "
            "give --tokens-per-step N",
        )
    raise LogError(None, "no line says how fast training went (a step time, a rate, or timed step numbers)")


def _rows(
    runs: list[_Run],
    placed: list[list[_Placed]],
    values: list[list[float | None]],
    unit: str,
    options: ImportOptions,
) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    latest = float("-inf")

    def add(at: float, value: float | None, step: int | None, event: str) -> None:
        nonlocal latest
        latest = max(latest, at)
        rows.append(
            {
                "ts": iso(datetime.fromtimestamp(round(latest, 3), UTC)),  # to the nearest millisecond
                "org": options.org,
                "cluster": options.cluster,
                "job": options.job,
                unit: "" if value is None else _figure(value),
                "step": "" if step is None else str(step),
                "event": event,
            }
        )

    for run, samples, rates in zip(runs, placed, values, strict=True):
        kept = [(sample, rate) for sample, rate in zip(samples, rates, strict=True) if rate is not None]
        if not kept:
            continue
        first = kept[0][0].at
        if run.start is not None and run.start.at is not None and run.start.at.timestamp() <= first:
            first = run.start.at.timestamp()
        add(first, None, None, "start")
        for sample, rate in kept:
            add(sample.at, rate, sample.progress.step, "")
        if run.end is not None:
            end = kept[-1][0].at
            if run.end.at is not None:
                end = max(end, run.end.at.timestamp())
            add(end, None, None, "end")
    return rows


def _figure(value: float) -> str:
    """Nine significant digits (0.3003003 samples/s and 97785.7362 tokens/s alike), never an exponent."""
    shown = f"{value:.9g}"
    return f"{value:.3f}".rstrip("0").rstrip(".") if "e" in shown else shown
