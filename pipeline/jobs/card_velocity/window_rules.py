"""The detectors' window rules applied to Spark's window aggregates with `mapInPandas`.

Spark computes the aggregates (`pipeline.jobs.card_velocity.windows`); each Arrow batch of
aggregate rows is handed to the detectors' vectorised window rule, which returns alert rows
(`ALERT_SPARK_DDL`). The functions returned here are picklable closures over the thresholds,
nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pandas as pd
from pyspark.sql import DataFrame

from detectors import (
    ALERT_SPARK_DDL,
    TerminalParams,
    VelocityParams,
    terminal_window_alerts,
    velocity_window_alerts,
)

FrameRule = Callable[[pd.DataFrame], pd.DataFrame]
BatchFn = Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]


def per_batch(rule: FrameRule) -> BatchFn:
    """A `mapInPandas` function: `rule` on every non-empty batch, only the alerts yielded.

    >>> rule = per_batch(lambda f: f[f["n"] > 1])
    >>> [len(f) for f in rule(iter([pd.DataFrame({"n": [1, 2, 3]}), pd.DataFrame({"n": []})]))]
    [2]
    """

    def apply(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for frame in frames:
            if len(frame):
                alerts = rule(frame)
                if len(alerts):
                    yield alerts

    return apply


def velocity_alert_rows(windows: DataFrame, params: VelocityParams) -> DataFrame:
    """`velocity_window_alerts` on per-card window aggregates (`card_windows.velocity_windows`)."""
    return windows.mapInPandas(
        per_batch(lambda frame: velocity_window_alerts(frame, params)), ALERT_SPARK_DDL
    )


def terminal_alert_rows(windows: DataFrame, params: TerminalParams) -> DataFrame:
    """`terminal_window_alerts` on per-merchant window aggregates (`merchant_windows`)."""
    return windows.mapInPandas(
        per_batch(lambda frame: terminal_window_alerts(frame, params)), ALERT_SPARK_DDL
    )
