"""The aggregates sink (`foreachBatch`): each batch's window rows to a Kafka topic and the lake.

Per micro-batch, with the rows cached once:

1. to the topic, keyed by `key_column`, as JSON objects with the row's columns plus
   `query_id` (the streaming query that computed them, so a reader can tell two runs over the
   same input apart);
2. then to `<lake>/aggregates/<name>/<query id>/batch-<batch id>/` (Spark Parquet, written to
   a temporary name, then renamed). A batch whose folder exists was written to both sinks, so
   a replayed batch runs (its stateful operators commit their state only then) but writes
   nothing. Kafka goes first: a crash between the two re-publishes the same rows on replay.

Window rows are deterministic (the same input gives the same rows), so a re-publish repeats a
row exactly; readers keep one row per key (`pipeline.jobs.vehicles.windows.STATS_KEY`).
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pyarrow.dataset as ds
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from core.config import StackConfig
from pipeline.alerts_sink import checkpoint_query_id
from pipeline.kafka_io import kafka_options


class AggregatesSink:
    """`foreachBatch` callable; see the module docstring. Counts what it did in `stats()`."""

    def __init__(
        self,
        stack: StackConfig,
        topic: str,
        name: str,
        key_column: str,
        checkpoint: Path,
        lake: Path,
    ) -> None:
        self.stack, self.topic, self.name, self.key_column = stack, topic, name, key_column
        self.checkpoint = checkpoint
        self.folder = lake / "aggregates" / name
        self._lock = threading.Lock()
        self.batches = 0
        self.rows_written = 0
        self.batches_replayed = 0

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        query_id = checkpoint_query_id(self.checkpoint)
        target = self.folder / query_id / f"batch-{batch_id:09d}"
        rows = batch.withColumn("query_id", F.lit(query_id)).persist()
        try:
            count = rows.count()  # runs the batch, whatever happens next
            with self._lock:
                self.batches += 1
                if target.exists():
                    self.batches_replayed += 1
                    return
            if count == 0:
                return
            (
                rows.select(
                    F.col(self.key_column).cast("string").alias("key"),
                    F.to_json(F.struct(*rows.columns)).alias("value"),
                )
                .write.format("kafka")
                .options(**kafka_options(self.stack))
                .option("topic", self.topic)
                .save()
            )
            partial = target.with_name(f".{target.name}.partial")
            shutil.rmtree(partial, ignore_errors=True)
            rows.write.parquet(str(partial.resolve()))
            os.replace(partial, target)
            with self._lock:
                self.rows_written += count
        finally:
            rows.unpersist()

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "batches": self.batches,
                "rows_written": self.rows_written,
                "batches_replayed": self.batches_replayed,
            }


def read_aggregates(lake: Path, name: str) -> ds.Dataset | None:
    """Every batch of `<lake>/aggregates/<name>/` as one Parquet dataset (None when empty)."""
    folder = lake / "aggregates" / name
    files = sorted(
        str(p) for p in folder.rglob("*.parquet") if not any(".partial" in q for q in p.parts)
    )
    if not files:
        return None
    return ds.dataset(files, format="parquet")
