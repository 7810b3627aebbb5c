"""How long the suite took, and where: every run of `make test` writes each test's time to
`.data/test-reports/durations.txt` and ends by printing its total and its slowest tests, so a
test that grows shows up in every run.

A test's time is its setup, call and teardown added up: a module's shared fixture is paid by
the first test that asks for it, and shows there.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

SHOWN = 20


class Timed(Protocol):
    """What a pytest test report carries that this module reads."""

    nodeid: str
    duration: float


def per_test(reports: Iterable[Timed]) -> dict[str, float]:
    """Each test's seconds, its phases added up, slowest first.

    >>> class R:
    ...     def __init__(self, nodeid, duration):
    ...         self.nodeid, self.duration = nodeid, duration
    >>> per_test([R("a", 1.0), R("b", 5.0), R("a", 2.5)])
    {'b': 5.0, 'a': 3.5}
    """
    seconds: dict[str, float] = defaultdict(float)
    for report in reports:
        seconds[report.nodeid] += report.duration
    return dict(sorted(seconds.items(), key=lambda item: -item[1]))


def table(seconds: dict[str, float], most: int | None = None) -> list[str]:
    """Lines of `seconds  test`, in the order given, the first `most` of them.

    >>> table({"tests/x.py::t": 61.25, "tests/y.py::u": 0.5}, most=1)
    ['    61.2s  tests/x.py::t']
    """
    rows = list(seconds.items())[:most]
    return [f"{s:8.1f}s  {nodeid}" for nodeid, s in rows]


def load_average() -> str:
    """The 1, 5 and 15-minute load averages, as `uptime` prints them."""
    return ", ".join(f"{load:.2f}" for load in os.getloadavg())


def per_worker(spans: Iterable[tuple[str, float, float]], started: float) -> list[str]:
    """Per worker, from its test phases' `(worker, start, stop)` epochs: its busy seconds and
    when it finished, counted from `started`; a worker done long before the other shows a
    run that ended on one long unit (`tests/xdist_groups.py` queues those first).

    >>> per_worker([("gw0", 10.0, 40.0), ("gw1", 10.0, 20.0), ("gw0", 40.0, 50.0)], 0.0)
    ['gw0: 40s busy, done at 50s', 'gw1: 10s busy, done at 20s']
    """
    busy: dict[str, float] = defaultdict(float)
    done: dict[str, float] = defaultdict(float)
    for worker, start, stop in spans:
        busy[worker] += stop - start
        done[worker] = max(done[worker], stop - started)
    return [f"{w}: {busy[w]:.0f}s busy, done at {done[w]:.0f}s" for w in sorted(busy)]


def summary(
    seconds: dict[str, float], wall_s: float, workers: int, placed: list[str] | None = None
) -> list[str]:
    """The closing lines: the total, the load, each worker's share and the slowest tests."""
    busy = sum(seconds.values())
    return [
        f"suite: {wall_s:.0f}s wall, {busy:.0f}s of tests on {workers} worker(s), "
        f"{len(seconds)} tests, load average {load_average()}",
        *(placed or []),
        f"slowest {min(SHOWN, len(seconds))}:",
        *table(seconds, SHOWN),
    ]


def write(seconds: dict[str, float], folder: Path) -> Path:
    """Every test's time, slowest first, as `folder/durations.txt`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "durations.txt"
    path.write_text("\n".join(table(seconds)) + "\n")
    return path
