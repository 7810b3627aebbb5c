"""The mapInPandas adapters and window helpers of card-velocity, without Spark."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pandas as pd
import pytest

from detectors import ALERT_COLUMNS, VelocityParams, velocity_window_alerts
from pipeline.jobs.card_velocity.window_rules import per_batch
from pipeline.jobs.card_velocity.windows import spark_interval

#: Modules of card-velocity whose docstrings carry examples (pipeline.config and
#: card_velocity.windows have none: tests/unit/test_doctests.py walks every module).
MODULES = [
    "pipeline.alerts_sink",
    "pipeline.jobs.card_velocity.state",
    "pipeline.triggers",
    "pipeline.jobs.card_velocity.window_rules",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0
    assert result.attempted > 0, f"{name} has no example to run"


def spark_like_windows() -> pd.DataFrame:
    """Rows as Arrow hands them to mapInPandas: arrays arrive as numpy arrays."""
    return pd.DataFrame(
        {
            "entity_id": ["c1", "c2"],
            "window_start": [0, 0],
            "window_end": [600_000, 600_000],
            "tx_count": [6, 2],
            "small_count": [6, 0],
            "amount_sum": [6.0, 80.0],
            "distinct_merchants": [6, 1],
            "last_event_time": [300_000, 100_000],
            "event_ids": [np.array([f"t{i}" for i in (5, 0, 3, 1, 4, 2)]), np.array(["x", "y"])],
        }
    )


def test_per_batch_yields_only_alerts_from_non_empty_batches() -> None:
    apply = per_batch(lambda frame: velocity_window_alerts(frame, VelocityParams()))
    out = list(apply(iter([spark_like_windows(), spark_like_windows().iloc[0:0]])))
    assert len(out) == 1
    alerts = out[0]
    assert list(alerts.columns) == list(ALERT_COLUMNS)
    assert alerts["entity_id"].tolist() == ["c1"]
    assert alerts["event_ids"].iloc[0] == [f"t{i}" for i in range(6)]  # sorted
    assert alerts["event_time"].iloc[0] == 300_000


def test_per_batch_skips_batches_without_alerts() -> None:
    apply = per_batch(lambda frame: velocity_window_alerts(frame, VelocityParams()))
    assert list(apply(iter([spark_like_windows().iloc[1:]]))) == []


@pytest.mark.parametrize(
    ("ms", "interval"),
    [(60_000, "60 seconds"), (3_600_000, "3600 seconds"), (250, "250 milliseconds")],
)
def test_spark_interval(ms: int, interval: str) -> None:
    assert spark_interval(ms) == interval
