"""Peak RSS of the bench process and its children, the local broker left out."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import psutil

from streamsim.kafka.broker import MAIN_CLASS as BROKER_MAIN_CLASS


def is_broker(proc: psutil.Process) -> bool:
    """Whether `proc` is a local Kafka broker (a child when the bench started it): the job's
    RSS leaves it out."""
    with suppress(psutil.Error):
        return BROKER_MAIN_CLASS in proc.cmdline()
    return False


@contextmanager
def peak_rss() -> Iterator[dict[str, float]]:
    """Peak RSS (MB) of this process and its children but a local broker (the job: Spark's
    JVM and its Python workers), sampled in a thread: `["mb"]`."""
    peak = {"mb": 0.0}
    stop = threading.Event()

    def sample() -> None:
        me = psutil.Process()
        while not stop.is_set():
            total = 0
            for proc in [me, *me.children(recursive=True)]:
                if is_broker(proc):
                    continue
                with suppress(psutil.Error):
                    total += proc.memory_info().rss
            peak["mb"] = max(peak["mb"], total / 2**20)
            stop.wait(0.5)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join(5)
