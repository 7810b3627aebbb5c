"""Events per entity per tumbling event-time window, with a watermark; malformed records
go to the dead-letter topic; optionally the sensors alerts.

source (Kafka JSON events) -> parse; malformed records -> dead-letter topic
  -> watermark -> tumbling window count, every record     -> `output_topic` (Kafka)
  -> with `sensors.sensor_alerts`: watermark -> the sensor rules of
     `pipeline.jobs.sensors.rules` (stuck sensor, spike, low battery, silent device) in the
     form `sensors.rules_form` names:
     - `python`: each event id once within the watermark, then per entity in event-time
       order (`applyInPandasWithState`, state per bucket of sensors:
       `pipeline.bucketed_rules`);
     - `engine`: stuck, spike and low battery as Column expressions over each entity's
       readings (each event id once) per sliding event-time window
       (`pipeline.jobs.sensors.engine`), and silence in Python state per bucket of sensors
       (`pipeline.jobs.sensors.silence`: no window holds an outage with its history)
                                                           -> `alerts_topic` + `<lake>/alerts/`

Queries: `sensors.counts`, `.deadletter`, and `.alerts` (micro-batch, `AlertSink`: Kafka +
lake, once per alert id: the engine form's overlapping windows repeat an alert, and the sink
writes it once); in the engine form `.silence` too. In the engine form, when the counts'
window is a multiple of the rules' slide and at most their window (`shared_counts_ms`; the
defaults, 1 minute against 4 sliding by 1), the alerts query counts too: a tumbling window is
the last slide of the sliding window that ends with it, so one aggregation, one read and one
parse serve both (`pipeline.jobs.sensors.sink.WindowSink`), and there is no `.counts` query.
With `sensors.sketches.enabled`, `.sketches` too (`pipeline.jobs.sensors.sketches`: the
noisiest devices and the distinct devices per site; it reads the input once more).

The Python stateful operators left: with `rules_form: engine` (the default), the silence
rule's `SilenceTails` per bucket in `applyInPandasWithState` (one numpy pass per bucket and
batch); with `rules_form: python`, `SensorRulesFactory`'s per-event rule states per bucket
(`pipeline.bucketed_rules`: one state per bucket, shipped with its rows). `bench pipeline
--job sensors`, 2,000 sensors: engine 9,022-11,574 readings/s; at 20,000 sensors engine
8,548, python 2,976 (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import LongType, StringType, StructField, StructType

from core.config import StackConfig
from core.contracts import SENSOR_READING
from core.kafka import ensure_topics
from pipeline.alerts_sink import AlertSink
from pipeline.bucketed_rules import bucketed_alerts
from pipeline.clock import alert_extra, on_clock
from pipeline.config import PipelineConfig
from pipeline.jobs.sensors import sketches
from pipeline.jobs.sensors.config import SensorsSettings
from pipeline.jobs.sensors.engine import window_rows
from pipeline.jobs.sensors.rules import FIELDS, SILENT, SensorRulesFactory
from pipeline.jobs.sensors.silence import silence_alerts
from pipeline.jobs.sensors.sink import WindowSink
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
SILENCE_QUERY = f"{NAME}.silence"


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


def shared_counts_ms(cfg: PipelineConfig) -> int | None:
    """The counts window (ms) when the engine form's aggregation can count it too: a multiple
    of the rules' slide, at most their window (tumbling windows end where sliding ones do)."""
    settings: SensorsSettings = cfg.sensors
    if not settings.sensor_alerts or settings.rules_form != "engine":
        return None
    counts, slide = duration_ms(cfg.window), duration_ms(settings.rules_slide)
    fits = counts % slide == 0 and counts <= duration_ms(settings.rules_window)
    return counts if fits else None


def alerts_stream(events: DataFrame, cfg: PipelineConfig) -> DataFrame:
    """The alerts query's rows: in the engine form window rows (`engine.window_rows`: alert
    structs, and the counts where `shared_counts_ms`); in the python form alert rows
    (`ALERT_SPARK_DDL`)."""
    settings: SensorsSettings = cfg.sensors
    watermarked = events.withWatermark("event_ts", cfg.watermark)
    if settings.rules_form == "engine":
        window, slide = settings.rules_window, settings.rules_slide
        return window_rows(watermarked, cfg.entity_key, window, slide, shared_counts_ms(cfg))
    return bucketed_alerts(
        watermarked.dropDuplicatesWithinWatermark(["event_id"]),
        F.col(cfg.entity_key),
        SensorRulesFactory(_ttl_ms(settings), settings.max_buffered),
        settings.state_buckets,
    )


def counts_stream(events: DataFrame, cfg: PipelineConfig) -> DataFrame:
    """Records per entity per tumbling `cfg.window` behind the watermark, duplicates too."""
    return (
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


def silence_stream(events: DataFrame, cfg: PipelineConfig) -> DataFrame:
    """The engine form's silence query's rows: alert rows (`ALERT_SPARK_DDL`) of
    `SilenceTails` per bucket of sensors (`pipeline.jobs.sensors.silence`)."""
    settings: SensorsSettings = cfg.sensors
    watermarked = events.withWatermark("event_ts", cfg.watermark)
    buckets = settings.state_buckets
    return silence_alerts(watermarked, cfg.entity_key, SILENT, buckets, _ttl_ms(settings))


def _ttl_ms(settings: SensorsSettings) -> int | None:
    """`sensor_state_ttl` in ms (None: keep a sensor's state forever)."""
    ttl = settings.sensor_state_ttl
    return None if ttl is None else duration_ms(ttl)


def alerts_streams(events: DataFrame, cfg: PipelineConfig) -> dict[str, DataFrame]:
    """The alerts queries' rows by query name: `alerts_stream`, and in the engine form
    `silence_stream`."""
    streams = {ALERTS_QUERY: alerts_stream(events, cfg)}
    if cfg.sensors.rules_form == "engine":
        streams[SILENCE_QUERY] = silence_stream(events, cfg)
    return streams


def alerts_queries(
    spark: SparkSession, stack: StackConfig, cfg: PipelineConfig, events: DataFrame
) -> list[StreamingQuery]:
    """The alerts queries, started: `alerts_streams` into `AlertSink`s (the engine form's
    windows through `WindowSink`, which also writes the counts where `shared_counts_ms`)."""
    ensure_topics(stack, [cfg.sensors.alerts_topic])
    use_rocksdb_state(spark)
    engine = cfg.sensors.rules_form == "engine"
    alerts = _sink(stack, cfg, "alerts", engine)
    counts_topic = cfg.output_topic if shared_counts_ms(cfg) is not None else None
    sinks: dict[str, Callable[[DataFrame, int], None]] = {ALERTS_QUERY: alerts}
    if engine:
        sinks = {
            ALERTS_QUERY: WindowSink(stack, counts_topic, cfg.entity_key, alerts),
            SILENCE_QUERY: _sink(stack, cfg, "silence", False),
        }
    streams = alerts_streams(events, cfg)
    return [_started(stack, cfg, name, rows, sinks[name]) for name, rows in streams.items()]


def _sink(stack: StackConfig, cfg: PipelineConfig, name: str, key_text: bool) -> AlertSink:
    """An `AlertSink` to the alerts topic and the lake, its ids kept under checkpoint `name`
    (`key_text`: the rows carry the engine forms' key text, not ids)."""
    return AlertSink(
        stack,
        cfg.sensors.alerts_topic,
        NAME,
        stack.dirs.checkpoints / NAME / name,
        stack.dirs.lake,
        split=with_alert_ids if key_text else None,
        extra=alert_extra(cfg.clock),
    )


def _started(
    stack: StackConfig,
    cfg: PipelineConfig,
    name: str,
    rows: DataFrame,
    sink: Callable[[DataFrame, int], None],
) -> StreamingQuery:
    """`rows` into `sink` per batch, as query `name` (checkpoint: its last name part)."""
    checkpoint = stack.dirs.checkpoints / NAME / name.rsplit(".", 1)[-1]
    writer = (
        rows.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .outputMode("append")
    )
    stateful = query_trigger(cfg.trigger, stateful=True)
    return with_trigger(writer, stateful).queryName(name).start()


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
    alerts = alerts_queries(spark, stack, cfg, events) if alerting else []  # started first
    counts: list[StreamingQuery] = []
    if shared_counts_ms(cfg) is None:
        records = as_kafka_record(F.col("entity_id"), counts_stream(events, cfg))
        writer = write_kafka(records, stack, cfg.output_topic, str(checkpoints / "counts"))
        counts.append(with_trigger(writer, cfg.trigger).queryName(f"{NAME}.counts").start())
    deadletters = write_kafka(
        deadletter_records(rejects, NAME),
        stack,
        cfg.deadletter_topic,
        str(checkpoints / "deadletter"),
    )
    deadletter = with_trigger(deadletters, cfg.trigger).queryName(f"{NAME}.deadletter").start()
    clock: list[StreamingQuery] = []
    if offsets is not None:
        stateful = query_trigger(cfg.trigger, stateful=True)
        clock.append(with_trigger(offsets, stateful).queryName(f"{NAME}.clock-offsets").start())
    sketch = sketches.start(spark, stack, cfg)  # with sensors.sketches.enabled
    return [*counts, deadletter, *alerts, *clock, *sketch]
