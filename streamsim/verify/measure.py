"""Measure a stream's disorder against its truth.

Stream records are matched to truth deliveries by event_id and occurrence: the k-th copy of an
event in the stream is the k-th delivery of it in truth by emit time (the original first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from streamsim.verify.readers import Stream, Truth

NO_MATCH = -1


@dataclass
class Joined:
    """Stream records joined with truth; arrays are aligned with the stream's records."""

    stream: Stream
    truth: Truth
    delivery: np.ndarray  # index of the matched truth record, or NO_MATCH
    event_of_truth: np.ndarray  # per truth record: its distinct event number
    entity_of_truth: np.ndarray  # per truth record: its entity number
    entities: list[str]
    lost: np.ndarray  # truth records (sent) with no stream record
    # Per truth record: the device whose clock and delivery it went through (truth device_id;
    # the entity itself when truth has none), and the device ids.
    device_of_truth: np.ndarray | None = None
    devices: list[str] | None = None

    def __post_init__(self) -> None:
        if self.device_of_truth is None:
            self.device_of_truth, self.devices = self.entity_of_truth, self.entities

    @property
    def matched(self) -> np.ndarray:
        return self.delivery[self.delivery != NO_MATCH]


def _index(values: list[str]) -> tuple[np.ndarray, list[str], dict[str, int]]:
    lookup: dict[str, int] = {}
    codes = np.fromiter((lookup.setdefault(v, len(lookup)) for v in values), np.int64, len(values))
    return codes, list(lookup), lookup


def _occurrence(codes: np.ndarray) -> np.ndarray:
    """How many earlier elements share each element's code (0 for the first)."""
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    run_start = np.repeat(starts, np.diff(np.r_[starts, codes.shape[0]]))
    out = np.empty_like(codes)
    out[order] = np.arange(codes.shape[0]) - run_start
    return out


def join(stream: Stream, truth: Truth) -> Joined:
    event_codes, _, event_lookup = _index(truth.event_id)
    entity_codes, entities, _ = _index(truth.entity_id)
    sent = np.flatnonzero(truth.emit_time >= 0)
    # Deliveries of each event, by emit time (the original before its retries on ties).
    sent = sent[np.lexsort((truth.duplicate[sent], truth.emit_time[sent], event_codes[sent]))]
    occurrence = _occurrence(event_codes[sent])
    width = int(occurrence.max()) + 1 if sent.size else 1
    slot = {
        int(k): int(t) for k, t in zip(event_codes[sent] * width + occurrence, sent, strict=True)
    }
    codes = np.fromiter(
        (event_lookup.get(e, NO_MATCH) for e in stream.event_id), np.int64, len(stream.event_id)
    )
    seen = _occurrence(codes)
    delivery = np.full(codes.shape[0], NO_MATCH, dtype=np.int64)
    for i, (code, k) in enumerate(zip(codes.tolist(), seen.tolist(), strict=True)):
        if code != NO_MATCH and k < width:
            delivery[i] = slot.get(code * width + k, NO_MATCH)
    found = np.zeros(len(truth.event_id), dtype=bool)
    found[delivery[delivery != NO_MATCH]] = True
    lost = sent[~found[sent]]
    device_codes, devices = None, None
    if truth.device_id is not None:
        device_codes, devices, _ = _index(truth.device_id)
    return Joined(
        stream, truth, delivery, event_codes, entity_codes, entities, lost, device_codes, devices
    )


def _late_fraction(times: np.ndarray) -> float:
    """Share of records whose event time is earlier than one already seen before them."""
    if times.shape[0] < 2:
        return 0.0
    seen_max = np.maximum.accumulate(times)
    return float(np.mean(times[1:] < seen_max[:-1]))


def _by_key_late_fraction(j: Joined) -> float:
    ordered = j.stream.key_order
    delivery = j.delivery[ordered]
    ok = delivery != NO_MATCH
    if ok.sum() < 2:
        return 0.0
    entity = j.entity_of_truth[delivery[ok]]
    times = j.stream.event_time[ordered][ok]
    order = np.argsort(entity, kind="stable")  # per entity, keeps delivery order
    entity, times = entity[order], times[order]
    first = np.r_[True, entity[1:] != entity[:-1]]
    group = np.cumsum(first) - 1
    ranks = np.unique(times, return_inverse=True)[1].reshape(-1)  # small ints: no overflow
    width = ranks.shape[0] + 1
    running = np.maximum.accumulate(ranks + group * width) - group * width  # per-group max
    times = ranks
    late = np.r_[False, times[1:] < running[:-1]] & ~first
    return float(late.sum() / max(times.shape[0] - int(first.sum()), 1))


def _percentiles(values_ms: np.ndarray) -> dict[str, float]:
    if values_ms.size == 0:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0}
    p50, p99 = np.percentile(values_ms, [50, 99])
    return {"p50": p50 / 1000, "p99": p99 / 1000, "max": float(values_ms.max()) / 1000}


def device_skews_ms(j: Joined) -> tuple[np.ndarray, np.ndarray]:
    """Per device with records: its median (event_time - true_time), and the device number."""
    matched = j.delivery != NO_MATCH
    d = j.delivery[matched]
    skew = j.stream.event_time[matched] - j.truth.true_time[d]
    assert j.device_of_truth is not None
    entity = j.device_of_truth[d]
    order = np.lexsort((skew, entity))
    entity, skew = entity[order], skew[order]
    starts = np.flatnonzero(np.r_[True, entity[1:] != entity[:-1]]) if entity.size else entity
    ends = np.r_[starts[1:], entity.shape[0]]
    medians = np.array([np.median(skew[a:b]) for a, b in zip(starts, ends, strict=True)])
    return medians, entity[starts]


def backlogs(j: Joined) -> dict[str, int]:
    """Per outage: how many original (non-retry) events it delivered."""
    counts: dict[str, int] = {}
    for d in j.matched.tolist():
        outage = j.truth.outage_id[d]
        if outage is not None and not j.truth.duplicate[d]:
            counts[outage] = counts.get(outage, 0) + 1
    return counts


def measure(j: Joined) -> dict[str, Any]:
    s, t = j.stream, j.truth
    matched = j.delivery != NO_MATCH
    d = j.delivery[matched]
    emit = s.timestamp[matched] if s.timestamp is not None else t.emit_time[d]
    skews, _ = device_skews_ms(j)
    truth_events = int(np.unique(j.event_of_truth).shape[0]) if t.event_id else 0
    stream_events = int(np.unique(j.event_of_truth[d]).shape[0]) if d.size else 0
    records = len(s.event_id)
    distinct = len(set(s.event_id))
    mismatched = int((s.event_time[matched] != t.event_time[d]).sum())
    stamp_mismatch = int((emit != t.emit_time[d]).sum()) if s.timestamp is not None else 0
    return {
        "out_of_order_fraction": _late_fraction(s.event_time),
        "out_of_order_fraction_by_key": _by_key_late_fraction(j),
        "lateness_s": _percentiles(emit - t.true_time[d]),
        "event_time_error_s": _percentiles(np.abs(s.event_time[matched] - t.true_time[d])),
        "skew_s": {
            "mean": float(skews.mean() / 1000) if skews.size else 0.0,
            "std": float(skews.std() / 1000) if skews.size else 0.0,
            "devices": int(skews.size),
        },
        "duplicate_fraction": (records - distinct) / distinct if distinct else 0.0,
        "drop_fraction": (truth_events - stream_events) / truth_events if truth_events else 0.0,
        "max_backlog": max(backlogs(j).values(), default=0),
        "records": records,
        "events": distinct,
        "truth_records": len(t.event_id),
        "lost": int(j.lost.shape[0]),
        "unexpected": int((~matched).sum()),
        "malformed": s.malformed,
        "event_time_mismatches": mismatched,
        "timestamp_mismatches": stamp_mismatch,
    }
