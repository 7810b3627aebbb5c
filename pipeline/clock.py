"""Device clock skew in Spark SQL: the estimator of `detectors.clock` as Column expressions
(no Python UDF, no Python state), and the per-device skew table on a compacted topic.

`lag = kafka_time - event_time`; per device and regime (a reset clock's records, an event time
a day or more away, are their own: `detectors.clock.regime`), the lower envelope of the lags
over the records sent in the `window_s` before a record is its offset estimate, negated:

- batch (`with_clock`): a window function over each device's records in send order, the range
  `window_s` back to the record (its peers sent in the same millisecond included): the figures
  of `detectors.clock.estimate`, record for record. For the evaluator, the lab and tests.
- streaming (`offset_table`): per device and regime, the lowest lag per sliding window of send
  time (`window_s` long, sliding by `slide_s`), emitted once the window closes (a watermark on
  send time, which the producer sets in order per device); `offset_records` turns it into the
  compacted topic's records, keyed by device: `<domain>.clock-offsets`
  (`core.contracts.topics.clock_offsets`), the fleet's latest offsets.
- a job on corrected time (`pipeline.clock_settings`, `clock.time: corrected_event_time`):
  `corrected_events` looks each record's device (and regime) up in that table, read back as a
  static DataFrame that Spark re-reads from Kafka each micro-batch (a stream-static join): the
  latest published envelope, a slide behind the record at most once the table has the device.
  A device not in the table yet falls back to its send time (the record's delay, uncorrected).

Kafka's `timestamp` is the producer's CreateTime; the simulator sets it to the simulated send
time (`emit_time` in truth), so the estimate does not depend on `--speed`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter

from core.config import StackConfig
from core.contracts import topics
from core.kafka.compacted import ensure_compacted
from detectors.clock import CLOCK, CORRECTED, OFFSET, ClockParams
from pipeline.clock_settings import ClockSettings
from pipeline.kafka_io import read_kafka_batch, write_kafka

LAG = "clock_lag_ms"
REGIME = "clock_regime"
KAFKA_MS = "kafka_ms"


def lag_ms(event_time: Column, kafka_time: Column) -> Column:
    """kafka_time (a timestamp) minus event_time (epoch ms), in ms."""
    return F.unix_millis(kafka_time) - event_time


def regime(lag: Column, params: ClockParams = CLOCK) -> Column:
    """1 for a record of a reset clock (`detectors.clock.regime`), else 0."""
    return (F.abs(lag) > F.lit(params.sane_ms)).cast("tinyint")


def with_clock(
    events: DataFrame,
    device: str,
    params: ClockParams = CLOCK,
    event_time: str = "event_time",
    kafka_time: str = "kafka_time",
) -> DataFrame:
    """`events` (a batch DataFrame) with `offset_estimate_ms` and `corrected_event_time`
    (epoch ms), `detectors.clock.estimate`'s figures; `kafka_time` is a timestamp column."""
    lag = lag_ms(F.col(event_time), F.col(kafka_time))
    staged = (
        events.withColumn(LAG, lag)
        .withColumn(REGIME, regime(F.col(LAG), params))
        .withColumn(KAFKA_MS, F.unix_millis(F.col(kafka_time)))
    )
    window = (
        Window.partitionBy(device, REGIME)
        .orderBy(KAFKA_MS)
        .rangeBetween(-params.window_ms, Window.currentRow)
    )
    envelope = F.min(LAG).over(window)
    return (
        staged.withColumn("clock_envelope", envelope)
        .withColumn(OFFSET, -F.col("clock_envelope"))
        .withColumn(CORRECTED, F.col(event_time) + F.col("clock_envelope"))
        .drop(LAG, REGIME, KAFKA_MS, "clock_envelope")
    )


def offset_table(
    events: DataFrame,
    device: str,
    params: ClockParams = CLOCK,
    slide_s: float = 30.0,
    event_time: str = "event_time",
    kafka_time: str = "kafka_time",
    delay: str = "0 seconds",
) -> DataFrame:
    """Per device, regime and sliding window of send time: the offset estimate (the lowest
    lag's negation), the records seen and the window's end. Streaming or batch; `delay`: the
    watermark on send time (the producer's own clock, in order per device: none needed)."""
    lag = lag_ms(F.col(event_time), F.col(kafka_time))
    staged = events.withColumn(LAG, lag).withColumn(REGIME, regime(F.col(LAG), params))
    if events.isStreaming:
        staged = staged.withWatermark(kafka_time, delay)
    span = f"{params.window_ms} milliseconds"
    slide = f"{round(slide_s * 1000)} milliseconds"
    return (
        staged.groupBy(F.col(device).alias("device_id"), REGIME, F.window(kafka_time, span, slide))
        .agg(F.min(LAG).alias("envelope"), F.count(F.lit(1)).alias("records"))
        .select(
            "device_id",
            (F.col(REGIME) == 1).alias("reset"),
            (-F.col("envelope")).alias(OFFSET),
            "records",
            F.unix_millis(F.col("window.end")).alias("as_of"),
        )
    )


def offset_records(table: DataFrame) -> DataFrame:
    """`offset_table`'s rows as Kafka records for `<domain>.clock-offsets`: key the device,
    value `{"device_id", "offset_estimate_ms", "reset", "records", "as_of"}` (compacted: the
    latest per device stays)."""
    return table.select(
        F.col("device_id").alias("key"),
        F.to_json(F.struct("device_id", OFFSET, "reset", "records", "as_of")).alias("value"),
    )


def offsets_writer(
    events: DataFrame,
    device: str,
    stack: StackConfig,
    topic: str,
    checkpoint: str,
    params: ClockParams = CLOCK,
    slide_s: float = 30.0,
) -> DataStreamWriter:
    """The streaming query that keeps `topic` (compacted, created if missing) at each device's
    latest offsets, from parsed `events` (with `kafka_time`); the caller sets the trigger."""
    ensure_compacted(stack, topic)
    records = offset_records(offset_table(events, device, params, slide_s))
    return write_kafka(records, stack, topic, checkpoint)


OFFSETS_DDL = (
    "device_id STRING, offset_estimate_ms BIGINT, reset BOOLEAN, records BIGINT, as_of BIGINT"
)


def latest_offsets(table: DataFrame) -> DataFrame:
    """Per device and regime, the newest row of an offsets topic's (key, value) records."""
    rows = table.select(F.from_json(F.col("value"), OFFSETS_DDL).alias("r")).select("r.*")
    return (
        rows.where(F.col("device_id").isNotNull())
        .groupBy("device_id", "reset")
        .agg(F.max_by(OFFSET, "as_of").alias("table_offset_ms"))
        .select(
            F.col("device_id").alias("clock_device"),
            F.col("reset").cast("tinyint").alias("clock_reset"),
            "table_offset_ms",
        )
    )


def corrected_events(
    events: DataFrame,
    device: str,
    offsets: DataFrame,
    params: ClockParams = CLOCK,
    event_time: str = "event_time",
    kafka_time: str = "kafka_time",
) -> DataFrame:
    """`events` judged on corrected time: `event_time` (and `event_ts`) become the corrected
    time, the device's own is kept as `device_event_time`, with `offset_estimate_ms` beside it.
    `offsets`: `latest_offsets` of the table (static; streaming `events` join it per batch)."""
    lag = lag_ms(F.col(event_time), F.col(kafka_time))
    staged = events.withColumn(REGIME, regime(lag, params))
    joined = staged.join(
        offsets,
        (F.col(device) == F.col("clock_device")) & (F.col(REGIME) == F.col("clock_reset")),
        "left",
    )
    offset = F.coalesce(F.col("table_offset_ms"), -lag_ms(F.col(event_time), F.col(kafka_time)))
    corrected = F.col("device_event_time") - F.col(OFFSET)
    return (
        joined.withColumn("device_event_time", F.col(event_time))
        .withColumn(OFFSET, offset)
        .withColumn(event_time, corrected)
        .withColumn("event_ts", F.timestamp_millis(F.col(event_time)))
        .drop(REGIME, "clock_device", "clock_reset", "table_offset_ms")
    )


def offsets_lookup(spark: SparkSession, stack: StackConfig, topic: str) -> DataFrame:
    """`latest_offsets` of `topic` (created compacted if missing), read whole from Kafka each
    time the plan runs."""
    ensure_compacted(stack, topic)
    return latest_offsets(read_kafka_batch(spark, stack, [topic]))


def on_clock(
    spark: SparkSession,
    stack: StackConfig,
    settings: ClockSettings,
    events: DataFrame,
    device: str,
    domain: str,
    checkpoint: str,
) -> tuple[DataFrame, DataStreamWriter | None]:
    """A job's parsed `events` on the time `settings` picks, and the offsets query to start
    (None on `event_time`: the events as they are). For the jobs of `sensors` and `vehicles`."""
    if not settings.corrected:
        return events, None
    topic = settings.offsets_topic or topics.clock_offsets(domain).name
    writer = offsets_writer(
        events, device, stack, topic, checkpoint, settings.params, settings.slide_s
    )
    lookup = offsets_lookup(spark, stack, topic)
    return corrected_events(events, device, lookup, settings.params), writer


def alert_extra(settings: ClockSettings) -> dict[str, str]:
    """What a job's alerts carry of the clock: `time` when judged on corrected time.

    >>> alert_extra(ClockSettings()), alert_extra(ClockSettings(time="corrected_event_time"))
    ({}, {'time': 'corrected_event_time'})
    """
    return {"time": settings.time} if settings.corrected else {}
