"""Silence (silent device): no reading for several of the device's own reporting intervals.

A device reports on its own clock: every few seconds, every few minutes. Its interval is learned
from its own readings: the median of its last `history` gaps between consecutive readings
(event-time order), once it has `min_history` of them; a single dropped reading doubles one gap
and leaves the median alone. A gap longer than `min_intervals` of those intervals is a silence.

Gaps are judged in event time over what has arrived, not in arrival time: a network outage
delays a device's readings, but they arrive later stamped inside the gap and fill it, so a
flushed outage raises nothing. And a gap is a silence only when the device's own sequence
numbers (`seq`, one per reading it makes) close it: the readings around it are consecutive, so
the device made none in between. Where they skip, the device did make readings, and they were
lost on the way (a full outage buffer, a drop) or stamped elsewhere (a clock reset puts them
years back): a link or clock fault, not a silent device. A reading without one never ends a
silence. The alert comes with the reading that ends the gap (the stream form cannot tell
a silence from a slow device before then), so a silence still open at the end of a stream is
not alerted. Fires per gap. Key: the event ids of the two readings around it.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view
from pydantic import Field

from detectors.alert import Alert, Evidence
from detectors.frames import EVENT_ID, EVENT_TIME, Columns, per_entity, prepare
from detectors.params import Thresholds
from detectors.series.base import SeriesState

RULE = "silence"
LABEL = "silent_device"
#: The device's sequence number: the one value the rule reads besides the time.
SEQ = "seq"


class SilenceParams(Thresholds):
    """Thresholds of `silence`."""

    min_intervals: float = Field(
        4.0, gt=1, description="A gap longer than this many of the device's intervals is silent."
    )
    history: int = Field(
        8, ge=1, le=1_000, description="The device's last gaps its interval is learned from."
    )
    min_history: int = Field(
        3, ge=1, le=1_000, description="Gaps seen before the device's gaps are judged."
    )


def silence_fires(gap_ms: Any, interval_ms: Any, params: SilenceParams, seq_step: Any = 1.0) -> Any:
    """The rule, on floats or numpy arrays alike (a NaN interval, not learned yet, never
    fires; nor does one of 0: readings stamped alike say nothing of a pace; nor a gap whose
    `seq_step`, the difference of the sequence numbers around it, is not 1)."""
    return (interval_ms > 0) & (gap_ms > params.min_intervals * interval_ms) & (seq_step == 1)


def learned_intervals(
    gaps: np.ndarray, params: SilenceParams, first: np.ndarray | None = None
) -> np.ndarray:
    """Per gap, the median of the up to `history` gaps before it (NaN with fewer than
    `min_history`): the interval each gap is judged against. With `first` (per gap, the index
    of its device's first gap), gaps of several devices in one array, each device's history
    its own.

    >>> learned_intervals(np.array([5, 5, 6, 40, 5]), SilenceParams()).tolist()
    [nan, nan, nan, 5.0, 5.5]
    >>> learned_intervals(np.array([5, 5, 6, 9, 9, 9, 9]), SilenceParams(),
    ...     first=np.array([0, 0, 0, 3, 3, 3, 3])).tolist()
    [nan, nan, nan, nan, nan, nan, 9.0]
    """
    h = min(params.history, max(len(gaps), 1))
    padded = np.concatenate([np.full(h, np.nan), gaps.astype(float)])
    windows = sliding_window_view(padded, h)[: len(gaps)]
    if first is not None:  # window column k holds gap i - h + k: keep those at or after first
        position = np.arange(len(gaps))[:, None] - h + np.arange(h)[None, :]
        windows = np.where(position >= first[:, None], windows, np.nan)
    counts = np.count_nonzero(~np.isnan(windows), axis=1)
    out = np.full(len(gaps), np.nan)
    ok = np.flatnonzero(counts >= params.min_history)
    if ok.size:
        out[ok] = np.nanmedian(windows[ok], axis=1)
    return out


def silence_evidence(gap_ms: float, interval_ms: float, params: SilenceParams) -> Evidence:
    return {
        "silent_s": float(gap_ms) / 1000.0,
        "interval_s": float(interval_ms) / 1000.0,
        "intervals": float(gap_ms) / float(interval_ms),
        **params.model_dump(),
    }


def _alert(
    entity_id: str, ids: tuple[str, str], time: int, evidence: Evidence, label: str | None
) -> Alert:
    return Alert.make(RULE, entity_id, time, ids, evidence, ids, label)


def silence_alerts(
    df: pd.DataFrame,
    params: SilenceParams | None = None,
    *,
    label: str | None = LABEL,
    columns: Columns = None,
) -> pd.DataFrame:
    """Vectorised form over readings (`entity_id`, `event_id`, `event_time`, `seq`).

    >>> rows = pd.DataFrame({"entity_id": "s1", "event_id": [f"e{i}" for i in range(6)],
    ...     "event_time": [0, 5_000, 10_000, 15_000, 60_000, 65_000], "seq": range(6)})
    >>> silence_alerts(rows)[["event_ids", "event_time"]].values.tolist()
    [[['e3', 'e4'], 60000]]
    >>> len(silence_alerts(rows.assign(seq=[0, 1, 2, 3, 12, 13])))  # 8 readings lost: no
    0
    """
    p = params or SilenceParams()

    def rule_for(entity_id: str, readings: pd.DataFrame) -> list[Alert]:
        times = readings[EVENT_TIME].to_numpy(np.int64)
        ids = readings[EVENT_ID].to_numpy(str)
        gaps = np.diff(times)
        intervals = learned_intervals(gaps, p)
        steps = np.diff(readings[SEQ].to_numpy(float))
        alerts = []
        for i in np.flatnonzero(silence_fires(gaps, intervals, p, steps)).tolist():
            evidence = silence_evidence(gaps[i], intervals[i], p)
            pair = (str(ids[i]), str(ids[i + 1]))
            alerts.append(_alert(entity_id, pair, int(times[i + 1]), evidence, label))
        return alerts

    return per_entity(prepare(df, (SEQ,), (), columns), rule_for)


class SilenceState(SeriesState):
    """Stateful form for one device (see `detectors.series.base`): its previous reading (id, time,
    sequence number) and its last `history` gaps. Its one value is the reading's `seq`.

    >>> state = SilenceState("s1")
    >>> times = [0, 5_000, 10_000, 15_000, 60_000, 65_000]
    >>> [len(state.update(f"e{i}", t, i)) for i, t in enumerate(times)]
    [0, 0, 0, 0, 1, 0]
    """

    rule: ClassVar[str] = RULE

    def __init__(
        self,
        entity_id: str,
        params: SilenceParams | None = None,
        *,
        label: str | None = LABEL,
        max_seen: int = 256,
    ) -> None:
        super().__init__(entity_id, SEQ, label, max_seen)
        self.params = params or SilenceParams()
        self.gaps: deque[int] = deque(maxlen=self.params.history)
        self.previous: tuple[str, int, float] | None = None

    def update(self, event_id: str, event_time: int, seq: int | None) -> list[Alert]:
        return self.push_numbers(event_id, event_time, [seq_number(seq)])

    def step(self, event_id: str, event_time: int, values: Sequence[float]) -> Alert | None:
        alert = None
        seq = values[0]
        if self.previous is not None:
            prev_id, prev_time, prev_seq = self.previous
            gap = event_time - prev_time
            if len(self.gaps) >= self.params.min_history:
                interval = float(statistics.median(self.gaps))  # 8 ints: no numpy per reading
                if silence_fires(gap, interval, self.params, seq - prev_seq):
                    evidence = silence_evidence(gap, interval, self.params)
                    ids = (prev_id, event_id)
                    alert = _alert(self.entity_id, ids, event_time, evidence, self.label)
            self.gaps.append(gap)
        self.previous = (event_id, event_time, seq)
        return alert

    def _snapshot(self) -> dict[str, Any]:
        previous = None
        if self.previous is not None:
            event_id, event_time, seq = self.previous
            previous = [event_id, event_time, None if math.isinf(seq) else seq]  # JSON: no inf
        return {"previous": previous, "gaps": list(self.gaps)}

    def _restore(self, data: Mapping[str, Any]) -> None:
        prev = data["previous"]
        self.previous = None if prev is None else (str(prev[0]), int(prev[1]), seq_number(prev[2]))
        self.gaps = deque((int(g) for g in data["gaps"]), maxlen=self.params.history)


def seq_number(seq: Any) -> float:
    """A reading's sequence number as the stateful form's value; an unknown one is -inf, so a
    gap next to it never fires (a NaN would drop the reading from the series).

    >>> seq_number(7), seq_number(None)
    (7.0, -inf)
    """
    return -math.inf if seq is None or seq != seq else float(seq)
