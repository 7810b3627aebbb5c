"""The sensor job's sketches (`sensors.sketches`, `pipeline.sketches`): per tumbling window the
noisiest devices (Count-Min: a device sending far more than its interval is among a window's
busiest) and the distinct devices per site (HyperLogLog).

The query reads and parses the input itself, with the fields it needs (the entity key and
`site`): windows are on the device's event time (`event_ts`), not the clock-corrected time.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import LongType, StringType, StructField, StructType

from core.config import StackConfig
from pipeline.config import PipelineConfig
from pipeline.kafka_io import parse_events, read_kafka
from pipeline.settings import duration_ms
from pipeline.sketches import sketch_rows, start_sketches

#: kind -> what its distinct count counts.
DISTINCT_OF = {"site": "device"}


def schema(entity_key: str) -> StructType:
    """The fields the sketches read."""
    return StructType(
        [
            StructField("event_id", StringType()),
            StructField(entity_key, StringType()),
            StructField("event_time", LongType()),
            StructField("site", StringType()),
        ]
    )


def sensor_sketch_rows(events: DataFrame, entity_key: str = "sensor_id") -> DataFrame:
    """Parsed readings (`event_ts`) -> sketch rows: device, and site (item: the device), each
    event id once."""
    return sketch_rows(
        events.dropDuplicates(["event_id"]),
        {
            "device": (F.col(entity_key), None),
            "site": (F.col("site"), F.col(entity_key)),
        },
    )


def start(spark: SparkSession, stack: StackConfig, cfg: PipelineConfig) -> list[StreamingQuery]:
    """`sensors.sketches`, when `sensors.sketches.enabled`."""
    settings = cfg.sensors.sketches
    if not settings.enabled:
        return []
    if cfg.trigger.mode == "available_now":  # a drain: every query ends
        settings = settings.model_copy(update={"trigger": cfg.trigger})
    raw = read_kafka(
        spark, stack, cfg.input_topics, cfg.starting_offsets, cfg.max_offsets_per_trigger
    )
    events, _ = parse_events(raw, schema(cfg.entity_key))  # the job dead-letters rejects
    key = cfg.entity_key
    return [
        start_sketches(
            stack,
            events,
            "sensors",
            settings,
            lambda batch: sensor_sketch_rows(batch, key),
            DISTINCT_OF,
            duration_ms(cfg.watermark),
            str(stack.dirs.checkpoints / "sensors" / "sketches"),
        )
    ]
