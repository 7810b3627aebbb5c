"""`CpuPacer`: keeps a panel tail's Python work to a share of one core, in short slices.

The tails run in the API process, so they share its GIL with the fraud endpoint. A tail that
parses a burst without pause (a port flush, a topic's history on start-up) takes the GIL for
the interpreter's whole switch interval (5 ms) each time it gets it, and every request queues
behind it. The pacer ends a slice once the thread has spent `slice_s` of its own CPU time and
then sleeps long enough that the thread's share of a core stays at `share`. Sleeping releases
the GIL, so a request waits for a tail at most about one slice.
"""

from __future__ import annotations

import time
from collections.abc import Callable

DEFAULT_SHARE = 0.5
DEFAULT_SLICE_S = 0.001


class CpuPacer:
    """Call `tick()` after each unit of work, always on the thread that does the work (the
    clock is that thread's CPU time); `paused_s` is the total time slept."""

    def __init__(
        self,
        share: float = DEFAULT_SHARE,
        slice_s: float = DEFAULT_SLICE_S,
        *,
        clock: Callable[[], float] = time.thread_time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not 0 < share <= 1 or slice_s <= 0:
            raise ValueError(f"0 < share <= 1 and slice_s > 0 required, got {share}, {slice_s}")
        self.share = share
        self.slice_s = slice_s
        self.paused_s = 0.0
        self._clock = clock
        self._sleep = sleep
        self._slice_start: float | None = None  # set on the working thread's first tick

    def tick(self) -> None:
        now = self._clock()
        if self._slice_start is None:
            self._slice_start = now
            return
        used = now - self._slice_start
        if used < self.slice_s:
            return
        pause = used * (1 - self.share) / self.share
        self._sleep(pause)  # even a 0 s sleep lets a waiting thread take the GIL
        self.paused_s += pause
        self._slice_start = self._clock()
