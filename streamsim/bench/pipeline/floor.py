"""The engine's floor for a job's input: Kafka read + parse + one window, nothing else.

The job's input topics, each read with its own Kafka source (as the jobs do) and parsed with
the job's schema for it (`pipeline.kafka_io.read_kafka` / `parse_events`), the keys and event
times of every kind in one stream, the job's watermark, one `FLOOR_WINDOW` tumbling count per
key, a `noop` sink, AvailableNow, in batches of the job's `max_offsets_per_trigger` (split over
the sources as shipping splits it). No job does less with this input, so a job's events/s over
this one's says what its own logic costs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from core.config import StackConfig
from core.errors import StreamsimError
from streamsim.bench.pipeline.measure import Throughput, throughput

FLOOR_WINDOW = "1 minute"


def tumbling_counts(events: Any, entity: str, watermark: str, window: str = FLOOR_WINDOW) -> Any:
    """Events per `entity` per tumbling event-time `window`, behind `watermark` (the
    sensors job's counts)."""
    from pyspark.sql import functions as F

    return (
        events.withWatermark("event_ts", watermark)
        .groupBy(F.col(entity).alias("entity_id"), F.window("event_ts", window))
        .agg(F.count(F.lit(1)).alias("events"))
    )


def floor_stream(spark: Any, stack: StackConfig, sources: Sequence[Any], cfg: Any) -> Any:
    """Every source (`jobs.Source`: topic, schema, required fields, key) read and parsed, its
    key and event time in one stream, counted per key and `FLOOR_WINDOW`."""
    from pipeline.kafka_io import parse_events, read_kafka

    cap = cfg.max_offsets_per_trigger
    cap = max(1, cap // len(sources)) if cap else None
    keyed = []
    for source in sources:
        raw = read_kafka(spark, stack, [source.topic], "earliest", cap)
        events, _ = parse_events(raw, source.schema, source.required)
        keyed.append(events.select(events[source.entity].alias("key"), "event_ts"))
    union = keyed[0]
    for frame in keyed[1:]:
        union = union.unionByName(frame)
    return tumbling_counts(union, "key", cfg.watermark)


def floor_drain(
    spark: Any, stack: StackConfig, sources: Sequence[Any], cfg: Any, name: str
) -> Throughput:
    """`floor_stream` draining its topics into `noop` (AvailableNow): its sustained rate;
    `events` counts what its batches read (by their offsets)."""
    checkpoint = stack.dirs.checkpoints / name
    started = time.monotonic()
    query = (
        floor_stream(spark, stack, sources, cfg)
        .writeStream.format("noop")
        .queryName(name)
        .outputMode("append")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise StreamsimError(f"floor query failed: {query.exception()}")
    return throughput(query.recentProgress, time.monotonic() - started)
