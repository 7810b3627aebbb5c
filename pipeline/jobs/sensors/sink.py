"""The engine form's sink (`foreachBatch`): a batch of window rows (`engine.window_rows`)
gives the `AlertSink` its alerts and, where they hold them, the counts topic its records.

The window rows are computed once per batch (persisted), so the counts and the alerts come
from one Kafka read, one parse and one aggregation. Both writes are at least once on a
replayed batch, as the Kafka sink of a counts query is; the `AlertSink` keeps alerts once by
id.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from core.config import StackConfig
from pipeline.alerts_sink import AlertSink
from pipeline.kafka_io import as_kafka_record, kafka_options
from pipeline.rules.alert_rows import FIELDS


class WindowSink:
    """`foreachBatch` callable: per batch, the alerts to `alerts`, and with a `counts_topic`
    the counts there."""

    def __init__(
        self, stack: StackConfig, counts_topic: str | None, entity: str, alerts: AlertSink
    ) -> None:
        self.stack, self.counts_topic, self.entity, self.alerts = (
            stack,
            counts_topic,
            entity,
            alerts,
        )

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self.counts_topic is None:
            self.alerts(alert_rows(batch), batch_id)
            return
        batch.persist()
        try:
            self._counts(batch, self.counts_topic)
            self.alerts(alert_rows(batch), batch_id)
        finally:
            batch.unpersist()

    def _counts(self, batch: DataFrame, topic: str) -> None:
        counts = batch.where(F.col("events") > 0).select(
            F.col(self.entity).alias("entity_id"), "window_start", "window_end", "events"
        )
        records = as_kafka_record(F.col("entity_id"), counts).write.format("kafka")
        records.options(**kafka_options(self.stack)).option("topic", topic).save()


def alert_rows(batch: DataFrame) -> DataFrame:
    """The alert rows (`FIELDS`) of a batch of window rows."""
    alerts = batch.select(F.explode("alerts").alias("a"))
    return alerts.select(*(F.col("a")[name].alias(name) for name in FIELDS))
