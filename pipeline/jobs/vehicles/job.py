"""Connected-vehicle telemetry: per-vehicle window statistics, trips, and the series rules.

source: `vehicles.telemetry` (`vehicle.telemetry/1` JSON, key vehicle_id)
  -> parse; malformed records -> dead-letter topic with the reason
  -> watermark on event time (`watermark`), duplicates (same event_id) dropped within it
  -> stats: per-vehicle 1-minute partials (sums, counts, min, max, KLL sketches) merged into
     the tumbling and sliding windows (readings; mean, min, max and percentiles of the main
     signals)                                      -> `aggregates.vehicle-stats` + the lake
  -> trips: per-vehicle session windows (distance from the odometer, duration, max and mean
     speed)                                        -> `aggregates.vehicle-trips` + the lake
  -> alerts: the detectors' series rules per vehicle in event-time order
     (`pipeline.jobs.vehicles.rules` in `applyInPandasWithState`, the vehicles' states
     kept per bucket of vehicles: `pipeline.bucketed_rules`)
                                                   -> `alerts` topic + `<lake>/alerts/`
  -> optional late rescoring (`vehicles.late.mode: rescore`): the same rules with a
     longer watermark; the alerts the main query did not raise -> `late.topic` with
     `late: true` (+ `<lake>/alerts/vehicles-late/`)

Queries (`streamsim pipeline run vehicles` prints each one's mode):
- `vehicles.deadletter`: stateless, Real-time Mode where it fits (else micro-batch).
- `vehicles.stats`, `.trips`: windowed aggregations, micro-batch, append mode,
  `AggregatesSink` (Kafka + lake) per batch; stats rows carry `final: true`.
- `vehicles.stats-provisional` (with `provisional_stats`): the stats so far in update
  mode, into the stats topic only, `final: false`, each batch that changes a window
  (Spark's update mode emits nothing when the watermark evicts a window: the final row is
  the stats query's).
- `vehicles.alerts` (and `.late-alerts`): state per bucket of vehicles, micro-batch,
  `AlertSink` (Kafka + lake, once per alert id) per batch.

The Python stateful operator: `vehicles.alerts`, the series rules' per-event states (no engine
form yet: threshold, trend, flatline, braking, speeding and GPS-jump episodes in event-time
order), per bucket of vehicles. `bench pipeline --job vehicles` (2,000 vehicles, 50k batches):
alerts query 3,858 events/s, whole job 4,992 (per vehicle before: 3,413 and 4,188).

Scheduling: the alerts query runs in FAIR pool `alerts` (weight 4, a core guaranteed), the
dead-letter query in pool `deadletter`, the stats, trips and late-alerts queries in pool
`aggregates` (`pipeline/fairscheduler.xml`): an alerts batch takes the next free core instead
of queuing behind a stats batch's tasks.

Late data: every stateful query drops the readings at or before its previous batch's watermark and
reports them per batch (`late_events`, `dropped_by_watermark` and the watermark lag in the metrics
topic). `pipeline.jobs.vehicles.parity` recomputes the stats in batch and explains every
difference by those drops.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from core.config import StackConfig
from core.contracts import VEHICLE_TELEMETRY
from core.kafka import ensure_topics
from pipeline.aggregates_sink import AggregatesSink
from pipeline.alerts_sink import AlertSink
from pipeline.bucketed_rules import bucketed_alerts
from pipeline.clock import alert_extra, on_clock
from pipeline.config import PipelineConfig
from pipeline.jobs.vehicles.config import VehiclesSettings
from pipeline.jobs.vehicles.rules import VehicleRulesFactory
from pipeline.jobs.vehicles.windows import (
    vehicle_stats,
    vehicle_stats_provisional,
    vehicle_trips,
)
from pipeline.kafka_io import (
    as_kafka_record,
    deadletter_records,
    input_partitions,
    parse_events,
    read_kafka,
    write_kafka,
)
from pipeline.progress import iso_ms
from pipeline.session import scheduler_pool, use_rocksdb_state
from pipeline.settings import TriggerSettings, duration_ms
from pipeline.triggers import output_mode, query_trigger, realtime_fits, start_query

NAME = "vehicles"
STATS_QUERY = f"{NAME}.stats"
TRIPS_QUERY = f"{NAME}.trips"
PROVISIONAL_STATS_QUERY = f"{NAME}.stats-provisional"
ALERTS_QUERY = f"{NAME}.alerts"
LATE_ALERTS_QUERY = f"{NAME}.late-alerts"
DEADLETTER_QUERY = f"{NAME}.deadletter"
LATE_FOLDER = f"{NAME}-late"
#: How long the late sink waits for the main alerts query to judge a reading first.
LATE_WAIT_S = 120.0

#: The fields this job reads from `vehicle.telemetry/1` records: all of them.
VEHICLE_SCHEMA = VEHICLE_TELEMETRY.spark_schema()
#: Beyond event_id and event_time, a reading without these goes to the dead-letter topic.
REQUIRED = ("vehicle_id",)


def readings(events: DataFrame, watermark: str) -> DataFrame:
    """Watermarked readings, each event id once within the watermark."""
    return events.withWatermark("event_ts", watermark).dropDuplicatesWithinWatermark(["event_id"])


def stats_stream(events: DataFrame, cfg: PipelineConfig) -> DataFrame:
    s = cfg.vehicles
    return vehicle_stats(
        readings(events, cfg.watermark),
        s.stats_windows,
        s.stats_signals,
        s.percentiles,
        s.percentile_sketch_k,
    )


def provisional_stats_stream(events: DataFrame, cfg: PipelineConfig) -> DataFrame:
    """The stats so far, for update mode (`provisional_stats`), as Kafka records: `final:
    false`."""
    s = cfg.vehicles
    stats = vehicle_stats_provisional(
        readings(events, cfg.watermark),
        s.stats_windows,
        s.stats_signals,
        s.percentiles,
        s.percentile_sketch_k,
    )
    return as_kafka_record(F.col("vehicle_id"), stats.withColumn("final", F.lit(False)))


def trips_stream(events: DataFrame, cfg: PipelineConfig) -> DataFrame:
    return vehicle_trips(readings(events, cfg.watermark), cfg.vehicles.trip_gap)


def rule_factory(settings: VehiclesSettings) -> VehicleRulesFactory:
    ttl = settings.vehicle_state_ttl
    return VehicleRulesFactory(
        settings.enabled_detectors(),
        None if ttl is None else duration_ms(ttl),
        settings.max_buffered,
    )


def alerts_stream(events: DataFrame, settings: VehiclesSettings, watermark: str) -> DataFrame:
    """Alert rows (`ALERT_SPARK_DDL`) of the enabled detectors, per vehicle in event-time order,
    the vehicles' states kept per bucket (`state_buckets`)."""
    return bucketed_alerts(
        readings(events, watermark),
        F.col("vehicle_id"),
        rule_factory(settings),
        settings.state_buckets,
    )


def aggregates_trigger(stateful: TriggerSettings, settings: VehiclesSettings) -> TriggerSettings:
    """The stats and trips queries' trigger: `aggregates_interval` in micro-batch mode.

    >>> job = TriggerSettings(mode="microbatch", interval="0 seconds")
    >>> slow = VehiclesSettings(aggregates_interval="30 seconds")
    >>> aggregates_trigger(job, slow).interval
    '30 seconds'
    >>> aggregates_trigger(TriggerSettings(mode="available_now"), slow).mode
    'available_now'
    """
    interval = settings.aggregates_interval
    if stateful.mode != "microbatch" or interval is None:
        return stateful
    return stateful.model_copy(update={"interval": interval})


def watermark_of(query: StreamingQuery) -> int | None:
    """The watermark of a query's latest batch, epoch ms (None before its first batch)."""
    progress = query.lastProgress
    if not progress:
        return None
    return iso_ms(progress.get("eventTime", {}).get("watermark"))


def waiter(main: Callable[[], StreamingQuery | None], timeout_s: float) -> Callable[[int], None]:
    """Blocks until the `main` query's watermark reaches an event time (or it stops, or the
    timeout passes): by then main has judged every reading up to that time."""

    def wait(event_time: int) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            query = main()
            if query is None or not query.isActive:
                return
            watermark = watermark_of(query)
            if watermark is not None and watermark >= event_time:
                return
            time.sleep(0.2)

    return wait


def start(spark: SparkSession, stack: StackConfig, cfg: PipelineConfig) -> list[StreamingQuery]:
    settings = cfg.vehicles
    checkpoints = stack.dirs.checkpoints / NAME
    late = settings.late
    outputs = [cfg.output_topic, cfg.deadletter_topic, settings.stats_topic, settings.trips_topic]
    ensure_topics(stack, [*outputs, *([late.topic] if late.mode == "rescore" else [])])
    use_rocksdb_state(spark)

    raw = read_kafka(
        spark, stack, cfg.input_topics, cfg.starting_offsets, cfg.max_offsets_per_trigger
    )
    events, rejects = parse_events(raw, VEHICLE_SCHEMA, REQUIRED)
    # windows, watermarks and rules on the time `clock.time` picks (`pipeline.clock`)
    events, offsets = on_clock(
        spark, stack, cfg.clock, events, "vehicle_id", NAME, str(checkpoints / "clock-offsets")
    )

    stateful = query_trigger(cfg.trigger, stateful=True)
    windowed = aggregates_trigger(stateful, settings)
    stateless, note = realtime_fits(
        query_trigger(settings.deadletter_trigger, stateful=False),
        partitions=input_partitions(stack, cfg.input_topics),
        slots=spark.sparkContext.defaultParallelism,
    )
    deadletter = write_kafka(
        deadletter_records(rejects, NAME),
        stack,
        cfg.deadletter_topic,
        str(checkpoints / "deadletter"),
        output_mode(stateless),
    )

    def aggregates(rows: DataFrame, topic: str, name: str) -> DataStreamWriter:
        checkpoint = checkpoints / name
        sink = AggregatesSink(
            stack, topic, f"{NAME}.{name}", "vehicle_id", checkpoint, stack.dirs.lake
        )
        return (
            rows.writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(checkpoint))
            .outputMode("append")
        )

    final_stats = stats_stream(events, cfg).withColumn("final", F.lit(True))
    stats = aggregates(final_stats, settings.stats_topic, "stats")
    trips = aggregates(trips_stream(events, cfg), settings.trips_topic, "trips")

    alerts_checkpoint = checkpoints / "alerts"
    main_sink = AlertSink(
        stack,
        cfg.output_topic,
        NAME,
        alerts_checkpoint,
        stack.dirs.lake,
        extra=alert_extra(cfg.clock),
    )
    alerts = (
        alerts_stream(events, settings, cfg.watermark)
        .writeStream.foreachBatch(main_sink)
        .option("checkpointLocation", str(alerts_checkpoint))
        .outputMode("append")
    )
    with scheduler_pool(spark, "deadletter"):
        first = start_query(deadletter, DEADLETTER_QUERY, stateless, note)
    with scheduler_pool(spark, "alerts"):
        main = start_query(alerts, ALERTS_QUERY, stateful)
    with scheduler_pool(spark, "aggregates"):
        queries = [
            first,
            start_query(stats, STATS_QUERY, windowed),
            start_query(trips, TRIPS_QUERY, windowed),
            main,
        ]
        if settings.provisional_stats:
            provisional = write_kafka(
                provisional_stats_stream(events, cfg),
                stack,
                settings.stats_topic,
                str(checkpoints / "stats-provisional"),
                "update",
            )
            queries.append(start_query(provisional, PROVISIONAL_STATS_QUERY, windowed))
        if offsets is not None:
            queries.append(start_query(offsets, f"{NAME}.clock-offsets", stateful))
    if late.mode == "rescore":
        late_checkpoint = checkpoints / "late-alerts"
        late_sink = AlertSink(
            stack,
            late.topic,
            NAME,
            late_checkpoint,
            stack.dirs.lake,
            folder=LATE_FOLDER,
            extra={"late": True, **alert_extra(cfg.clock)},
            also_known=main_sink.known_ids,
            wait_for=waiter(lambda: main, LATE_WAIT_S),
        )
        late_alerts = (
            alerts_stream(events, settings, late.watermark)
            .writeStream.foreachBatch(late_sink)
            .option("checkpointLocation", str(late_checkpoint))
            .outputMode("append")
        )
        with scheduler_pool(spark, "aggregates"):
            queries.append(start_query(late_alerts, LATE_ALERTS_QUERY, stateful))
    return queries
