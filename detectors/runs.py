"""Runs of consecutive readings that meet a condition: the shared core of the duration rules.

A run is a maximal stretch of consecutive readings (in event-time order) that all meet the
condition. A reading that fails it, a gap longer than `max_gap_ms` between readings, or an
explicit break starts over. A run *fires* once, at the first reading where it has lasted at
least `min_count` readings and `min_duration_ms` (from its first reading to this one).

`run_fires` is the vectorised form; `RunTracker` is the same logic one reading at a time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from detectors.alert import MAX_EVENT_IDS

BoolArray = NDArray[np.bool_]


def run_starts(
    mask: ArrayLike,
    times_ms: ArrayLike,
    max_gap_ms: float | None = None,
    breaks: ArrayLike | None = None,
) -> BoolArray:
    """True at the first reading of each run."""
    met = np.asarray(mask, dtype=bool)
    starts = met.copy()
    starts[1:] &= ~met[:-1]
    if max_gap_ms is not None and met.size > 1:
        starts[1:] |= met[1:] & (np.diff(np.asarray(times_ms, dtype=np.float64)) > max_gap_ms)
    if breaks is not None:
        starts |= met & np.asarray(breaks, dtype=bool)
    return starts


def run_fires(
    mask: ArrayLike,
    times_ms: ArrayLike,
    min_count: int = 1,
    min_duration_ms: float = 0.0,
    max_gap_ms: float | None = None,
    breaks: ArrayLike | None = None,
) -> tuple[BoolArray, NDArray[np.int64]]:
    """`(fires, start)`: where each run fires, and each reading's run start (-1 outside runs).

    >>> fires, start = run_fires([0, 1, 1, 1, 0, 1], [0, 1, 2, 3, 4, 5], min_count=2)
    >>> fires.astype(int).tolist(), start.tolist()
    ([0, 0, 1, 0, 0, 0], [-1, 1, 1, 1, -1, 5])
    """
    met = np.asarray(mask, dtype=bool)
    times = np.asarray(times_ms, dtype=np.float64)
    starts = run_starts(met, times, max_gap_ms, breaks)
    index = np.arange(met.size)
    start = np.maximum.accumulate(np.where(starts, index, -1))
    start = np.where(met, start, -1)
    safe = np.maximum(start, 0)
    ok = met & (index - safe + 1 >= min_count) & (times - times[safe] >= min_duration_ms)
    fires = ok.copy()
    fires[1:] &= starts[1:] | ~ok[:-1]
    return fires, start.astype(np.int64)


class RunTracker:
    """`run_fires` one reading at a time (feed readings in event-time order).

    >>> run = RunTracker(min_count=2)
    >>> [run.step(m, t, f"e{t}") for t, m in enumerate([False, True, True, True])]
    [False, False, True, False]
    >>> run.ids()
    ['e1', 'e2', 'e3']
    """

    __slots__ = (
        "count",
        "fired",
        "head",
        "in_run",
        "last_time",
        "max_gap_ms",
        "min_count",
        "min_duration_ms",
        "start_time",
        "tail",
    )

    def __init__(
        self, min_count: int = 1, min_duration_ms: float = 0.0, max_gap_ms: float | None = None
    ) -> None:
        self.min_count, self.min_duration_ms, self.max_gap_ms = (
            min_count,
            min_duration_ms,
            max_gap_ms,
        )
        self.in_run, self.fired, self.count = False, False, 0
        self.start_time = 0
        self.last_time: int | None = None
        self.head: list[str] = []
        self.tail: deque[str] = deque(maxlen=MAX_EVENT_IDS // 2)

    def step(
        self, met: bool, time_ms: int, event_id: str, brk: bool = False, can_fire: bool = True
    ) -> bool:
        """Feed one reading; True when the run fires at this reading (never where `can_fire`
        is False: the reading extends the run only)."""
        gap = self.last_time is not None and self.max_gap_ms is not None
        gap = gap and time_ms - (self.last_time or 0) > (self.max_gap_ms or 0)
        self.last_time = time_ms
        if not met:
            self.in_run = False
            return False
        if not self.in_run or gap or brk:
            self._start(time_ms)
        self.count += 1
        self._remember(event_id)
        if self.fired or self.count < self.min_count or not can_fire:
            return False
        self.fired = time_ms - self.start_time >= self.min_duration_ms
        return self.fired

    def ids(self) -> list[str]:
        """The run's event ids so far (capped like `Alert.event_ids`)."""
        return [*self.head, *self.tail]

    def duration_s(self) -> float:
        return ((self.last_time or 0) - self.start_time) / 1000.0

    def _start(self, time_ms: int) -> None:
        self.in_run, self.fired, self.count, self.start_time = True, False, 0, time_ms
        self.head.clear()
        self.tail.clear()

    def _remember(self, event_id: str) -> None:
        if len(self.head) < MAX_EVENT_IDS // 2:
            self.head.append(event_id)
        else:
            self.tail.append(event_id)

    def snapshot(self) -> dict[str, Any]:
        return {
            "in_run": self.in_run,
            "fired": self.fired,
            "count": self.count,
            "start_time": self.start_time,
            "last_time": self.last_time,
            "head": list(self.head),
            "tail": list(self.tail),
        }

    def restore(self, data: Mapping[str, Any]) -> None:
        self.in_run, self.fired = bool(data["in_run"]), bool(data["fired"])
        self.count, self.start_time = int(data["count"]), int(data["start_time"])
        last = data["last_time"]
        self.last_time = None if last is None else int(last)
        self.head = [str(i) for i in data["head"]]
        self.tail = deque((str(i) for i in data["tail"]), maxlen=MAX_EVENT_IDS // 2)
