"""Rows a job's own stateful operator refused as late, counted where Spark's late drops are.

Spark counts the rows its watermark drops (`numRowsDroppedByWatermark`); a Python operator
that refuses rows itself (an entity's history past its horizon, a use behind what its entity
has released) reports them through its output: a count row (`alert_id` null, `dropped` > 0)
beside its alert rows (`dropped` 0). `LateDrops`, the `AlertSink.split` of its query, takes
the counts out and publishes them as `late_events` of query `<job>.late-drops` on the metrics
topic, before the batch ends: never silent. `streamsim evaluate` adds them to the job's alerts
query's own late drops.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from core.config import StackConfig
from detectors import ALERT_COLUMNS, ALERT_SPARK_DDL
from pipeline.alerts_sink import AlertSink
from pipeline.metrics import MetricsPublisher
from pipeline.progress import BatchReport

#: The count column beside the alert columns, and the operator's output schema with it.
DROPPED = "dropped"
OUTPUT_DDL = f"{ALERT_SPARK_DDL}, {DROPPED} BIGINT"
#: The suffix of the metrics query that carries a job's drop counts.
QUERY_SUFFIX = ".late-drops"


def with_drops(
    alerts: pd.DataFrame | None, dropped: int, extra: Sequence[str] = ()
) -> list[pd.DataFrame]:
    """An operator's output frames: `alerts` (`ALERT_COLUMNS` and the `extra` columns) with
    `dropped` 0, then a count row (`extra` null) when `dropped` > 0; none when neither.

    >>> [f[["alert_id", "dropped"]].to_dict("records") for f in with_drops(None, 3)]
    [[{'alert_id': None, 'dropped': 3}]]
    >>> with_drops(None, 0)
    []
    """
    frames = []
    if alerts is not None and not alerts.empty:
        frames.append(alerts.assign(**{DROPPED: 0}))
    if dropped:
        row = {c: None for c in ALERT_COLUMNS} | {"event_ids": [], DROPPED: dropped}
        frames.append(pd.DataFrame([row | dict.fromkeys(extra)]))
    return frames


class LateDrops:
    """`AlertSink.split`: takes the count rows out of a batch's rows and publishes their sum as
    `late_events` of query `<job>.late-drops` on the metrics topic."""

    def __init__(self, stack: StackConfig, job: str) -> None:
        self.stack = stack
        self.job = job
        self.query = f"{job}{QUERY_SUFFIX}"
        self.total = 0
        self._metrics: MetricsPublisher | None = None
        self._batch = 0

    def __call__(self, rows: pd.DataFrame) -> pd.DataFrame:
        counts = rows[rows["alert_id"].isna()]
        dropped = int(counts[DROPPED].sum()) if not counts.empty else 0
        if dropped:
            self.total += dropped
            if self._metrics is None:
                self._metrics = MetricsPublisher(self.stack, self.job, "microbatch")
            self._metrics(
                BatchReport(
                    self.query, self._batch, 0, 0.0, 0.0, None, dropped, 0, late_events=dropped
                )
            )
            self._metrics.close()  # flushed: a late drop is reported before the batch ends
            self._batch += 1
        alerts = rows[rows["alert_id"].notna()].drop(columns=[DROPPED])
        return alerts.reset_index(drop=True)


def counting_sink(
    stack: StackConfig, topic: str, job: str, checkpoint: Path, carry: Sequence[str] = (DROPPED,)
) -> AlertSink:
    """The `AlertSink` (Kafka `topic` + lake) of a query whose operator emits count rows:
    `LateDrops` takes them out and publishes them; `carry`: the columns beyond the alerts'."""
    return AlertSink(
        stack, topic, job, checkpoint, stack.dirs.lake, carry=carry, split=LateDrops(stack, job)
    )
