"""Pacing: when to hand each chunk of sends to the sink, in wall time. Never what to send.

- speed X: a send with emit time e goes out no earlier than wall0 + (e - start) / X.
- a rate limit (max_rate, or a shape over wall time): at most r(t) events per wall second,
  enforced by spacing chunks (GCRA: each chunk of k books k / r seconds).
A slow sink simply makes us late; nothing is dropped, nothing is skipped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

import numpy as np

from simulators.settings import PacingSettings, RateShape

CHUNK_WALL_S = 0.01  # a chunk spans at most this much wall time when paced
MAX_CHUNK = 5000  # and at most this many sends


class Pacer:
    def __init__(
        self,
        speed: float | None,
        start_ms: int,
        shape: RateShape | None = None,
        max_rate: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.speed = speed
        self.start_ms = start_ms
        self.shape = shape
        self.max_rate = max_rate
        self._clock = clock
        self._sleep = sleep
        self._wall0 = clock()
        self._next_free = self._wall0
        self.wall0_epoch_ms = time.time_ns() // 1_000_000
        self.waited_s = 0.0

    @classmethod
    def from_settings(
        cls, settings: PacingSettings, start_ms: int, speed: float | str | None = None
    ) -> Pacer:
        chosen = settings.speed if speed is None else speed
        return cls(
            None if chosen == "max" else float(chosen), start_ms, settings.shape, settings.max_rate
        )

    def restart(self) -> None:
        self._wall0 = self._next_free = self._clock()
        self.wall0_epoch_ms = time.time_ns() // 1_000_000

    def anchor(self) -> dict[str, float | int | None]:
        """Where simulated time met wall time: at speed X, simulated time t was reached at
        wall_ms + (t - sim_ms) / X (unpaced runs, speed None, have no such mapping)."""
        return {"wall_ms": self.wall0_epoch_ms, "sim_ms": self.start_ms, "speed": self.speed}

    def rate_at(self, elapsed_s: float) -> float:
        """The rate limit now (events per wall second); inf when unlimited."""
        rate = self.shape.at(elapsed_s) if self.shape else math.inf
        return min(rate, self.max_rate) if self.max_rate else rate

    def chunks(self, emit_ms: np.ndarray) -> Iterator[slice]:
        """Slices of `emit_ms` (sorted), each yielded once it may be sent."""
        n = emit_ms.shape[0]
        i = 0
        while i < n:
            now = self._clock()
            rate = self.rate_at(now - self._wall0)
            j = min(n, i + MAX_CHUNK)
            due = now
            if self.speed is not None:
                span_ms = CHUNK_WALL_S * self.speed * 1000
                j = min(j, max(i + 1, int(np.searchsorted(emit_ms, emit_ms[i] + span_ms, "right"))))
                due = self._wall0 + (int(emit_ms[i]) - self.start_ms) / 1000 / self.speed
            if math.isfinite(rate):
                j = min(j, i + max(1, int(rate * CHUNK_WALL_S)))
                due = max(due, self._next_free)
            if due > now:
                self._sleep(due - now)
                self.waited_s += due - now
            if math.isfinite(rate):
                self._next_free = max(due, now) + (j - i) / rate  # no credit for being late
            yield slice(i, j)
            i = j
