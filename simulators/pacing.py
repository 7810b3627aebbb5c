"""Pacing: when to hand each chunk of sends to the sink, in wall time. Never what to send.

- speed X: a send with emit time e goes out no earlier than wall0 + (e - start) / X.
- a rate limit (max_rate, or a shape over wall time): at most r(t) events per wall second,
  enforced by spacing chunks (GCRA: each chunk of k books k / r seconds).
A slow sink simply makes us late; nothing is dropped, nothing is skipped.

Speed and max_rate can change while a run goes on (`Pacer.retune`), e.g. from a control file
another process writes (`PacingControl`, `streamsim simulate --control FILE`): the simulated
time reached so far stays where it is, and the rest is paced at the new values.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from pydantic import ValidationError

from simulators.settings import PacingSettings, RateShape

CHUNK_WALL_S = 0.01  # a chunk spans at most this much wall time when paced
MAX_CHUNK = 5000  # and at most this many sends
CONTROL_POLL_S = 0.25  # a control file is looked at at most this often (wall seconds)
LIVE_KEYS = ("speed", "max_rate")

#: Changes to apply (`speed`: a factor or "max"; `max_rate`: events/s or None), or None.
ControlFn = Callable[[], Mapping[str, Any] | None]

log = logging.getLogger(__name__)


class PacingControl:
    """A JSON file another process rewrites (whole, by rename) to retune a running pacer:
    `{"speed": 5.0 | "max", "max_rate": 2000 | null}`, a key left out keeps its value. Called,
    it returns the file's values when the file changed since the last call (looked at no more
    often than every `CONTROL_POLL_S`), else None; a bad file is logged and skipped."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self._clock = clock
        self._checked = -math.inf
        self._seen: tuple[int, int, int] | None = None

    def __call__(self) -> dict[str, Any] | None:
        now = self._clock()
        if now - self._checked < CONTROL_POLL_S:
            return None
        self._checked = now
        try:
            stat = self.path.stat()
            stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
            if stamp == self._seen:
                return None
            self._seen = stamp
            data = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, orjson.JSONDecodeError) as exc:
            log.warning("pacing control %s not read: %s", self.path, exc)
            return None
        if not isinstance(data, dict) or not set(data) <= set(LIVE_KEYS):
            log.warning("pacing control %s: want an object of %s", self.path, LIVE_KEYS)
            return None
        try:
            checked = PacingSettings.model_validate(data)
        except ValidationError as exc:
            log.warning("pacing control %s: %s", self.path, exc)
            return None
        return {key: getattr(checked, key) for key in data}


class Pacer:
    def __init__(
        self,
        speed: float | None,
        start_ms: int,
        shape: RateShape | None = None,
        max_rate: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        control: ControlFn | None = None,
    ) -> None:
        self.speed = speed
        self.start_ms = start_ms
        self.shape = shape
        self.max_rate = max_rate
        self._clock = clock
        self._sleep = sleep
        self._control = control
        self._wall0 = self._shape0 = clock()  # speed's anchor; where the shape's time starts
        self._next_free = self._wall0
        self._last_ms = start_ms  # emit time of the last send
        self.wall0_epoch_ms = time.time_ns() // 1_000_000
        self.waited_s = 0.0
        self.retunes: list[dict[str, Any]] = []  # the anchor and cap after each retune

    @classmethod
    def from_settings(
        cls,
        settings: PacingSettings,
        start_ms: int,
        speed: float | str | None = None,
        control: ControlFn | None = None,
    ) -> Pacer:
        chosen = settings.speed if speed is None else speed
        return cls(
            None if chosen == "max" else float(chosen),
            start_ms,
            settings.shape,
            settings.max_rate,
            control=control,
        )

    def restart(self) -> None:
        self._wall0 = self._shape0 = self._next_free = self._clock()
        self.wall0_epoch_ms = time.time_ns() // 1_000_000

    def retune(self, changes: Mapping[str, Any]) -> None:
        """New `speed` (a factor or "max") and/or `max_rate` (None: no cap) from now on: the
        simulated time reached stays put (paced: where the old speed has got to by now; unpaced:
        the last send), and what follows it is paced at the new speed."""
        now = self._clock()
        if "speed" in changes:
            speed = changes["speed"]
            reached = (
                self.start_ms + (now - self._wall0) * self.speed * 1000
                if self.speed is not None
                else self._last_ms
            )
            self.start_ms, self._wall0 = round(reached), now
            self.wall0_epoch_ms = time.time_ns() // 1_000_000
            self.speed = None if speed == "max" else float(speed)
        if "max_rate" in changes:
            rate = changes["max_rate"]
            self.max_rate = None if rate is None else float(rate)
            self._next_free = min(self._next_free, now)  # no debt booked at the old cap
        self.retunes.append({**self.anchor(), "max_rate": self.max_rate})

    def anchor(self) -> dict[str, float | int | None]:
        """Where simulated time met wall time: at speed X, simulated time t was reached at
        wall_ms + (t - sim_ms) / X (unpaced runs, speed None, have no such mapping)."""
        return {"wall_ms": self.wall0_epoch_ms, "sim_ms": self.start_ms, "speed": self.speed}

    def rate_at(self, elapsed_s: float) -> float:
        """The rate limit now (events per wall second); inf when unlimited."""
        rate = self.shape.at(elapsed_s) if self.shape else math.inf
        return min(rate, self.max_rate) if self.max_rate else rate

    def chunks(self, emit_ms: np.ndarray) -> Iterator[slice]:
        """Slices of `emit_ms` (sorted), each yielded once it may be sent. With a control, a
        long wait wakes every `CONTROL_POLL_S` to look for a retune and plans again."""
        n = emit_ms.shape[0]
        i = 0
        while i < n:
            changes = self._control() if self._control is not None else None
            if changes:
                self.retune(changes)
            now = self._clock()
            rate = self.rate_at(now - self._shape0)
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
                wait = due - now if self._control is None else min(due - now, CONTROL_POLL_S)
                self._sleep(wait)
                self.waited_s += wait
                if wait < due - now:
                    continue
            if math.isfinite(rate):
                self._next_free = max(due, now) + (j - i) / rate  # no credit for being late
            self._last_ms = int(emit_ms[j - 1])
            yield slice(i, j)
            i = j
