"""A running load test's figures so far, for whoever watches it (`loadtest --progress FILE`,
read by the panel API): rewritten whole, by rename, about once a second.

    {"schema": "loadtest.progress/1", "phase": "warmup" | "measured" | "draining" | "done",
     "elapsed_s": 12.0, "sent": 1200, "finished": 1195, "total": 3000,
     "achieved_rate": 99.0,            # good answers per second since the previous write
     "good": 1190, "errors": 5,        # warm-up included
     "latency_ms": {"p50": 1.2, "p95": 2.0, "p99": 3.1, "max": 9.0}}   # answered so far

Latencies are from each request's intended send time, as in the report, over every answer so
far (the warm-up's included: a live view has nothing else to show during it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from streamsim.loadtest.recorder import ERROR, GOOD, SHED, Recorder

SCHEMA = "loadtest.progress/1"
PERCENTILES = {"p50": 50.0, "p95": 95.0, "p99": 99.0}


def latency_so_far(rec: Recorder) -> dict[str, float | None]:
    """p50, p95, p99 and max (ms) of every answered request so far; None before any answer."""
    answered = rec.latency_s[~np.isnan(rec.latency_s)]
    if answered.size == 0:
        return {**dict.fromkeys(PERCENTILES), "max": None}
    values = np.percentile(answered, list(PERCENTILES.values())) * 1000
    out: dict[str, float | None] = {
        name: round(float(v), 3) for name, v in zip(PERCENTILES, values, strict=True)
    }
    out["max"] = round(float(answered.max()) * 1000, 3)
    return out


def phase(sent: int, total: int, elapsed_s: float, warmup_s: float) -> str:
    if sent >= total:
        return "draining"
    return "warmup" if elapsed_s < warmup_s else "measured"


class LiveFile:
    """A `Progress` callback writing the figures so far to `path` at most every `every_s`."""

    def __init__(
        self,
        path: Path,
        warmup_s: float,
        every_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self.warmup_s = warmup_s
        self.every_s = every_s
        self.clock = clock
        self.t0: float | None = None  # the first call: the run's clock has started by then
        self._last_t: float | None = None
        self._last_good = 0
        self.latest: dict[str, Any] | None = None

    def __call__(self, sent: int, finished: int, total: int, rec: Recorder) -> None:
        now = self.clock()
        if self.t0 is None:
            self.t0 = now
        all_done = finished >= total  # the last call: never throttled away
        if self._last_t is not None and now - self._last_t < self.every_s and not all_done:
            return
        self.write(self.snapshot(sent, finished, total, rec, now))

    def snapshot(
        self, sent: int, finished: int, total: int, rec: Recorder, now: float
    ) -> dict[str, Any]:
        t0 = now if self.t0 is None else self.t0
        good = int(np.count_nonzero(rec.outcome == GOOD))
        since = now - (t0 if self._last_t is None else self._last_t)
        rate = (good - self._last_good) / since if since > 0 else 0.0
        self._last_t, self._last_good = now, good
        elapsed = now - t0
        return {
            "schema": SCHEMA,
            "phase": phase(sent, total, elapsed, self.warmup_s),
            "elapsed_s": round(elapsed, 3),
            "sent": sent,
            "finished": finished,
            "total": total,
            "achieved_rate": round(rate, 1),
            "good": good,
            "errors": int(np.count_nonzero(rec.outcome == ERROR)),
            "shed": int(np.count_nonzero(rec.outcome == SHED)),
            "latency_ms": latency_so_far(rec),
        }

    def done(self) -> None:
        """The run is over (its report is being written): the last figures, phase `done`."""
        if self.latest is not None and self.t0 is not None:
            elapsed = round(self.clock() - self.t0, 3)
            self.write({**self.latest, "phase": "done", "elapsed_s": elapsed})

    def write(self, snapshot: dict[str, Any]) -> None:
        self.latest = snapshot
        part = self.path.with_suffix(".part")
        part.write_bytes(orjson.dumps(snapshot))
        os.replace(part, self.path)  # whole: a reader never sees half a file
