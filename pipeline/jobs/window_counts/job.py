"""Events per entity per tumbling event-time window, with a watermark; malformed records
go to the dead-letter topic.

source (Kafka JSON events) -> parse -> watermark -> tumbling window count -> sink (Kafka)
"""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import LongType, StringType, StructField, StructType

from core.config import StackConfig
from pipeline.config import PipelineConfig
from pipeline.kafka_io import (
    as_kafka_record,
    deadletter_records,
    parse_events,
    read_kafka,
    write_kafka,
)
from pipeline.triggers import with_trigger

NAME = "window-counts"


def event_schema(entity_key: str) -> StructType:
    return StructType(
        [
            StructField("event_id", StringType()),
            StructField(entity_key, StringType()),
            StructField("event_time", LongType()),
        ]
    )


def start(spark: SparkSession, stack: StackConfig, cfg: PipelineConfig) -> list[StreamingQuery]:
    checkpoints = stack.dirs.checkpoints / NAME
    raw = read_kafka(
        spark, stack, cfg.input_topics, cfg.starting_offsets, cfg.max_offsets_per_trigger
    )
    events, rejects = parse_events(raw, event_schema(cfg.entity_key))

    counts = (
        events.withWatermark("event_ts", cfg.watermark)
        .groupBy(F.col(cfg.entity_key).alias("entity_id"), F.window("event_ts", cfg.window))
        .agg(F.count(F.lit(1)).alias("events"))
        .select(
            "entity_id",
            F.unix_millis(F.col("window.start")).alias("window_start"),
            F.unix_millis(F.col("window.end")).alias("window_end"),
            "events",
        )
    )
    counts_writer = write_kafka(
        as_kafka_record(F.col("entity_id"), counts),
        stack,
        cfg.output_topic,
        str(checkpoints / "counts"),
    )
    deadletter_writer = write_kafka(
        deadletter_records(rejects, NAME),
        stack,
        cfg.deadletter_topic,
        str(checkpoints / "deadletter"),
    )
    return [
        with_trigger(counts_writer, cfg.trigger).queryName(f"{NAME}.counts").start(),
        with_trigger(deadletter_writer, cfg.trigger).queryName(f"{NAME}.deadletter").start(),
    ]
