"""Throughput from streaming progress: events per batch, sustained rates, quantiles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson


@dataclass
class Throughput:
    events_per_s: float  # sustained: batches after the first
    measured: int  # events in those batches
    events: int  # events in every batch
    batches: int
    wall_s: float


def batch_events(progress: Mapping[str, Any]) -> int:
    """Events a batch read, from its sources' offsets: a union reads its source once per
    branch, and numInputRows counts every read.

    >>> batch_events({"sources": [{"startOffset": '{"t": {"0": 5}}',
    ...     "endOffset": '{"t": {"0": 9, "1": 3}}', "numInputRows": 14}]})
    7
    """
    return sum(offset_delta(source) for source in progress.get("sources", []))


def offset_delta(source: Mapping[str, Any]) -> int:
    """A Kafka (`{topic: {partition: offset}}`) or rate-micro-batch (`{"offset": n}`) source's
    offsets between a batch's start and end."""
    start, end = (orjson.loads(source.get(k) or "null") for k in ("startOffset", "endOffset"))
    start = start or {}
    if not end:
        return 0
    if "offset" in end:
        return int(end["offset"]) - int(start.get("offset", 0))
    return sum(
        int(offset) - int(start.get(topic, {}).get(p, 0))
        for topic, parts in end.items()
        for p, offset in parts.items()
    )


def with_input(progress: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [p for p in progress if batch_events(p)]


def throughput(progress: Sequence[Mapping[str, Any]], wall_s: float) -> Throughput:
    """Sustained rate over the batches that read input, the first (warm-up) left out.

    >>> batch = lambda a, b, ms: {"durationMs": {"triggerExecution": ms},
    ...     "sources": [{"startOffset": f'{{"offset": {a}}}', "endOffset": f'{{"offset": {b}}}'}]}
    >>> throughput([batch(0, 10, 5000), batch(10, 30, 1000), batch(30, 30, 500)], 7.0)
    Throughput(events_per_s=20.0, measured=20, events=30, batches=2, wall_s=7.0)
    """
    read = [(p, batch_events(p)) for p in with_input(progress)]
    steady = read[1:] or read
    measured = sum(n for _, n in steady)
    seconds = sum(p["durationMs"]["triggerExecution"] for p, _ in steady) / 1000
    rate = measured / seconds if seconds else 0.0
    return Throughput(rate, measured, sum(n for _, n in read), len(read), wall_s)


def percentiles(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    p50, p99 = np.percentile(np.asarray(values, dtype=float), [50, 99])
    return {"p50": round(float(p50), 1), "p99": round(float(p99), 1)}


def batch_span(progress: Mapping[str, Any]) -> tuple[float, float]:
    """(start, end) of a batch, epoch seconds."""
    from pipeline.progress import iso_ms

    start = (iso_ms(progress.get("timestamp")) or 0) / 1000
    return start, start + progress["durationMs"]["triggerExecution"] / 1000


def sustained(per_query: Mapping[str, Sequence[Mapping[str, Any]]], events: int) -> Throughput:
    """The whole job's sustained rate over all its queries (sharing the cores): the events
    after the first batch of each query, over the time from the latest end of a first batch
    to the latest end of a last batch (every query has read its first batch by then, so that
    is warm-up left out, as `throughput` leaves out one query's first batch).

    >>> b = lambda s, ms, a, z: {"timestamp": f"2026-01-01T00:00:0{s}.000Z",
    ...     "durationMs": {"triggerExecution": ms},
    ...     "sources": [{"startOffset": f'{{"offset": {a}}}', "endOffset": f'{{"offset": {z}}}'}]}
    >>> q1 = [b(0, 2000, 0, 10), b(2, 1000, 10, 30)]
    >>> q2 = [b(0, 3000, 0, 10), b(3, 2000, 10, 30)]
    >>> sustained({"a": q1, "b": q2}, 30).events_per_s
    10.0
    """
    read = {name: with_input(p) for name, p in per_query.items()}
    read = {name: p for name, p in read.items() if p}
    if not read:
        return Throughput(0.0, 0, events, 0, 0.0)
    first_end = max(batch_span(p[0])[1] for p in read.values())
    last_end = max(batch_span(p[-1])[1] for p in read.values())
    first_events = max(batch_events(p[0]) for p in read.values())
    measured = events - first_events
    seconds = last_end - first_end
    rate = measured / seconds if seconds > 0 and measured > 0 else 0.0
    batches = max(len(p) for p in read.values())
    return Throughput(
        rate, measured, events, batches, last_end - min(batch_span(p[0])[0] for p in read.values())
    )


def event_time_per_s(times: Sequence[int]) -> float:
    """Events per second of event time over the middle 98% of `times`.

    >>> round(event_time_per_s([*range(0, 100_000, 100), 10**12]))  # one event every 100 ms
    10
    """
    if len(times) < 2:
        return 1.0
    low, high = np.percentile(np.asarray(times, dtype=np.float64), [1, 99])
    inside = sum(1 for t in times if low <= t <= high)
    return inside * 1000 / (high - low) if high > low else 1.0


def dir_mb(path: Path) -> float:
    """Size on disk of a folder (a job's checkpoints and state), MB."""
    if not path.exists():
        return 0.0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20
