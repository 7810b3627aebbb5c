"""`CpuPacer`: slices of the thread's CPU time, each followed by the pause that keeps the share."""

from __future__ import annotations

import threading
import time

import pytest

from live.consumers.pacing import CpuPacer


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


def test_pauses_once_a_slice_is_spent_for_the_share() -> None:
    clock = FakeClock()
    pacer = CpuPacer(0.25, 0.001, clock=clock, sleep=clock.sleep)
    pacer.tick()  # the first tick starts the slice on the working thread
    clock.now = 0.0006
    pacer.tick()
    assert clock.sleeps == []
    clock.now = 0.0012
    pacer.tick()
    assert clock.sleeps == [pytest.approx(0.0036)]  # 1.2 ms of work at a 25% share
    clock.now = 0.0015
    pacer.tick()  # a new slice began after the pause
    assert len(clock.sleeps) == 1
    assert pacer.paused_s == pytest.approx(0.0036)


def test_full_share_still_yields_every_slice() -> None:
    clock = FakeClock()
    pacer = CpuPacer(1.0, 0.001, clock=clock, sleep=clock.sleep)
    pacer.tick()
    clock.now = 0.002
    pacer.tick()
    assert clock.sleeps == [0.0]


@pytest.mark.parametrize(("share", "slice_s"), [(0.0, 0.001), (1.5, 0.001), (0.5, 0.0)])
def test_rejects_bad_settings(share: float, slice_s: float) -> None:
    with pytest.raises(ValueError, match="share"):
        CpuPacer(share, slice_s)


def test_a_busy_thread_keeps_to_its_share_of_a_core() -> None:
    """Real clocks: a thread that only burns CPU, until it has used 0.1 s of it, pauses three
    times as long as it worked (a quarter share), however the machine schedules it."""
    pacer = CpuPacer(0.25, 0.001)
    used: list[float] = []

    def burn() -> None:
        start_cpu = time.thread_time()
        while time.thread_time() - start_cpu < 0.1:
            sum(range(200))
            pacer.tick()
        used.append(time.thread_time() - start_cpu)

    thread = threading.Thread(target=burn)
    thread.start()
    thread.join()
    # Each pause is 3x the slice's CPU time; what no slice counted is the last, unfinished
    # slice and the CPU of the pauses themselves: a few slices' worth at most.
    assert 3 * (used[0] - 0.01) <= pacer.paused_s <= 3 * used[0]
