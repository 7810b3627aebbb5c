"""Events per entity per tumbling event-time window, with a watermark; malformed records
go to the dead-letter topic; optionally the sensors alerts.

source (Kafka JSON events) -> parse; malformed records -> dead-letter topic
  -> watermark -> tumbling window count                   -> `output_topic` (Kafka)
  -> with `sensors.sensor_alerts`: watermark, each event id once within it -> the sensor
     rules of `pipeline.jobs.sensors.rules` (stuck sensor, spike, low battery, silent device)
     in the form `sensors.rules_form` names:
     - `python`: per entity in event-time order (`transformWithStateInPandas`);
     - `engine`: Column expressions over each entity's readings per sliding event-time
       window (`pipeline.jobs.sensors.engine`; no Python worker)
                                                           -> `alerts_topic` + `<lake>/alerts/`

Queries: `sensors.counts`, `.deadletter`, and `.alerts` (state per sensor, micro-batch,
`AlertSink`: Kafka + lake, once per alert id: the engine form's overlapping windows repeat
an alert, and the sink writes it once).

The Python stateful operator left: with `rules_form: python` (the default),
`SensorRulesProcessor` in `transformWithStateInPandas` (issue 31's profile: about 2.5 ms per
sensor per batch in state round trips and Arrow framing). With `rules_form: engine` none is
left; the Python that remains is the driver's `AlertSink` over a batch's few alert rows (and
their ids' hash). Measured, the alerts query alone from Kafka (214,665 readings of
`config/scenarios/sensors.yaml`, seed 42, 2,500 sensors, 600 s; batches of 10,000 readings,
local 2 cores, a shared machine; two runs): python 110.1 s and 107.3 s (1,950 and 2,001
readings/s; load average 9.2 and 2.5 before), engine 89.2 s and 42.4 s (2,406 and 5,058
readings/s; load 16.8 and 10.4); in one batch python 52.2 s (4,112/s, load 6.6), engine
72.1 s (2,976/s, load 4.3). The Python form costs per sensor per batch; the engine
form per reading per window (each reading is in 4 windows), and its window state (each
window's readings array) is rewritten per batch.

Each query reads and parses the topic itself: counts and alerts are both stateful
aggregations, and a `foreachBatch` sink sees a batch after them, so they cannot share one
scan without merging them into one aggregation.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import LongType, StringType, StructField, StructType

from core.config import StackConfig
from core.contracts import SENSOR_READING
from core.kafka import ensure_topics
from detectors import ALERT_SPARK_DDL
from pipeline.alerts_sink import AlertSink
from pipeline.clock import alert_extra, on_clock
from pipeline.config import PipelineConfig
from pipeline.jobs.sensors.config import SensorsSettings
from pipeline.jobs.sensors.engine import window_alerts
from pipeline.jobs.sensors.rules import FIELDS, SensorRulesProcessor
from pipeline.jobs.vehicles.job import FIRST_BATCH_WAIT_S, first_batch
from pipeline.kafka_io import (
    as_kafka_record,
    deadletter_records,
    parse_events,
    read_kafka,
    write_kafka,
)
from pipeline.rules.alert_rows import with_alert_ids
from pipeline.session import use_rocksdb_state
from pipeline.settings import duration_ms
from pipeline.triggers import query_trigger, with_trigger

NAME = "sensors"
ALERTS_QUERY = f"{NAME}.alerts"


def event_schema(entity_key: str, sensor_fields: bool = False) -> StructType:
    """The fields the job reads: id, entity and time; plus the sensor rules' `FIELDS` (as the
    `sensor.reading/1` contract types them) when the alerts query runs."""
    extra = [f for f in SENSOR_READING.spark_schema().fields if f.name in FIELDS]
    return StructType(
        [
            StructField("event_id", StringType()),
            StructField(entity_key, StringType()),
            StructField("event_time", LongType()),
            *(extra if sensor_fields else []),
        ]
    )


def alerts_stream(events: DataFrame, cfg: PipelineConfig) -> DataFrame:
    """Alert rows (`ALERT_SPARK_DDL`) of the sensor rules in `rules_form`; the engine form's
    `alert_id` holds the key text (`pipeline.rules.alert_rows.with_alert_ids` hashes it)."""
    settings: SensorsSettings = cfg.sensors
    if settings.rules_form == "engine":
        once = events.withWatermark("event_ts", cfg.watermark).dropDuplicatesWithinWatermark(
            ["event_id"]
        )
        return window_alerts(once, cfg.entity_key, settings.rules_window, settings.rules_slide)
    ttl = settings.sensor_state_ttl
    processor = SensorRulesProcessor(
        None if ttl is None else duration_ms(ttl), settings.max_buffered
    )
    return (
        events.withWatermark("event_ts", cfg.watermark)
        .dropDuplicatesWithinWatermark(["event_id"])
        .select(cfg.entity_key, *processor.input_columns, "event_ts")
        .groupBy(cfg.entity_key)
        .transformWithStateInPandas(processor, ALERT_SPARK_DDL, "Append", "EventTime")
    )


def start(spark: SparkSession, stack: StackConfig, cfg: PipelineConfig) -> list[StreamingQuery]:
    checkpoints = stack.dirs.checkpoints / NAME
    alerting = cfg.sensors.sensor_alerts
    raw = read_kafka(
        spark, stack, cfg.input_topics, cfg.starting_offsets, cfg.max_offsets_per_trigger
    )
    events, rejects = parse_events(raw, event_schema(cfg.entity_key, alerting))
    # windows, watermarks and rules on the time `clock.time` picks (`pipeline.clock`)
    events, offsets = on_clock(
        spark, stack, cfg.clock, events, cfg.entity_key, NAME, str(checkpoints / "clock-offsets")
    )
    clock_queries: list[StreamingQuery] = []
    if offsets is not None:
        stateful = query_trigger(cfg.trigger, stateful=True)
        clock_queries.append(
            with_trigger(offsets, stateful).queryName(f"{NAME}.clock-offsets").start()
        )

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
    queries: list[StreamingQuery] = []
    if alerting:
        topic = cfg.sensors.alerts_topic
        ensure_topics(stack, [topic])
        use_rocksdb_state(spark)
        alerts_checkpoint = checkpoints / "alerts"
        engine = cfg.sensors.rules_form == "engine"
        sink = AlertSink(
            stack,
            topic,
            NAME,
            alerts_checkpoint,
            stack.dirs.lake,
            split=with_alert_ids if engine else None,
            extra=alert_extra(cfg.clock),
        )
        alerts_writer = (
            alerts_stream(events, cfg)
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(alerts_checkpoint))
            .outputMode("append")
        )
        stateful = query_trigger(cfg.trigger, stateful=True)
        queries.append(with_trigger(alerts_writer, stateful).queryName(ALERTS_QUERY).start())
        first_batch(queries[0], FIRST_BATCH_WAIT_S)
    return [
        with_trigger(counts_writer, cfg.trigger).queryName(f"{NAME}.counts").start(),
        with_trigger(deadletter_writer, cfg.trigger).queryName(f"{NAME}.deadletter").start(),
        *queries,
        *clock_queries,
    ]
