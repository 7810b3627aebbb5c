"""The suite's own time report: each test's phases added up, the slowest listed first."""

from __future__ import annotations

import doctest
from pathlib import Path

from tests import suite_report


def test_its_examples_hold() -> None:
    result = doctest.testmod(suite_report)
    assert result.attempted >= 3 and result.failed == 0


def test_the_summary_names_the_slowest_first_and_the_file_lists_all(tmp_path: Path) -> None:
    seconds = {f"tests/t.py::t{i}": float(i) for i in range(30, 0, -1)}
    lines = suite_report.summary(seconds, wall_s=500.0, workers=2)
    assert lines[0].startswith("suite: 500s wall, 465s of tests on 2 worker(s), 30 tests")
    assert lines[1] == "slowest 20:"
    assert lines[2].endswith("tests/t.py::t30") and lines[-1].endswith("tests/t.py::t11")
    assert len(lines) == 22
    written = suite_report.write(seconds, tmp_path / "reports").read_text().splitlines()
    assert len(written) == 30 and written[0] == "    30.0s  tests/t.py::t30"


def test_each_worker_shows_its_busy_time_and_when_it_finished() -> None:
    spans = [("gw1", 100.0, 160.0), ("gw0", 100.0, 400.0), ("gw1", 160.0, 170.0)]
    lines = suite_report.per_worker(spans, started=90.0)
    assert lines == ["gw0: 300s busy, done at 310s", "gw1: 70s busy, done at 80s"]
    summary = suite_report.summary({"t": 1.0}, 400.0, 2, lines)
    assert summary[1:3] == lines and summary[3] == "slowest 1:"
