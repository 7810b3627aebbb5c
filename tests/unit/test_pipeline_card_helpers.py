"""The cards job's Spark-free helpers: docstring examples and window intervals."""

from __future__ import annotations

import doctest
import importlib

import pytest

from pipeline.event_windows import spark_interval

#: Modules of cards whose docstrings carry examples (pipeline.config and
#: cards.windows have none: tests/unit/test_doctests.py walks every module).
MODULES = [
    "pipeline.alerts_sink",
    "pipeline.jobs.cards.state",
    "pipeline.triggers",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0
    assert result.attempted > 0, f"{name} has no example to run"


@pytest.mark.parametrize(
    ("ms", "interval"),
    [(60_000, "60 seconds"), (3_600_000, "3600 seconds"), (250, "250 milliseconds")],
)
def test_spark_interval(ms: int, interval: str) -> None:
    assert spark_interval(ms) == interval
