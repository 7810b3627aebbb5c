"""Per-vehicle window statistics and trip summaries in Spark SQL.

Inputs are watermarked, de-duplicated `vehicle.telemetry/1` readings (`vehicle_id`, `event_id`,
`event_time` ms, `event_ts`, the signals). The same functions build the streaming queries and the
batch oracle (`pipeline.jobs.vehicle_telemetry.parity`): on a batch DataFrame, `withWatermark` does
nothing and `dropDuplicatesWithinWatermark` drops every duplicate.

- `vehicle_stats`: per vehicle and event-time window of each spec (tumbling or sliding), the
  number of readings and, per signal, mean, min, max and `percentile_approx` levels
  (`<signal>_mean`, `_min`, `_max`, `_p50`, ...)                -> `aggregates.vehicle-stats`
- `vehicle_trips`: per vehicle and `session_window` (a silence longer than the gap ends a
  trip): start and end event times, duration, distance (odometer delta), max and mean speed,
  readings, the device's trip ids                                -> `aggregates.vehicle-trips`

`vehicle_stats` is one aggregation over every window of every spec: each reading is exploded
into its windows (`spec_windows`, the windows `window()` would give it, tagged with their
spec), so the input is read, parsed and de-duplicated once however many specs there are (one
aggregation per spec, unioned, would need a watermarked, de-duplicated stream each: Spark 4.2
advances the watermark of only the first of several aggregations fed by one watermark node).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.event_windows import window_bounds
from pipeline.settings import WindowSpec

STATS_SCHEMA = "aggregates.vehicle-stats/1"
TRIPS_SCHEMA = "aggregates.vehicle-trips/1"
#: Columns that identify a stats row: one per vehicle, window spec and window.
STATS_KEY = ("vehicle_id", "window_s", "slide_s", "window_start")
STAT_SUFFIXES = ("mean", "min", "max")
#: The columns of a stats row before its statistics (`stat_columns`).
STATS_LEAD = (
    "schema",
    "vehicle_id",
    "window_start",
    "window_end",
    "window_s",
    "slide_s",
    "readings",
    "first_event_time",
    "last_event_time",
)


def percentile_name(level: float) -> str:
    """The column suffix of a percentile level.

    >>> [percentile_name(q) for q in (0.5, 0.95, 0.999)]
    ['p50', 'p95', 'p99_9']
    """
    return f"p{level * 100:g}".replace(".", "_")


def stat_columns(signals: Sequence[str], percentiles: Sequence[float]) -> list[str]:
    """The statistic columns of a stats row, in order.

    >>> stat_columns(["speed_kmh"], [0.5])
    ['speed_kmh_mean', 'speed_kmh_min', 'speed_kmh_max', 'speed_kmh_p50']
    """
    names = [*STAT_SUFFIXES, *(percentile_name(q) for q in percentiles)]
    return [f"{signal}_{name}" for signal in signals for name in names]


def _aggregates(
    signals: Sequence[str], percentiles: Sequence[float], accuracy: int
) -> list[Column]:
    columns: list[Column] = []
    for signal in signals:
        value = F.col(signal).cast("double")
        columns += [
            F.avg(value).alias(f"{signal}_mean"),
            F.min(value).alias(f"{signal}_min"),
            F.max(value).alias(f"{signal}_max"),
        ]
        if percentiles:
            levels = F.array(*(F.lit(float(q)) for q in percentiles))
            columns.append(F.percentile_approx(value, levels, accuracy).alias(f"{signal}_pct"))
    return columns


def _percentile_columns(signals: Sequence[str], percentiles: Sequence[float]) -> list[Column]:
    return [
        F.col(f"{signal}_pct")[i].alias(f"{signal}_{percentile_name(q)}")
        for signal in signals
        for i, q in enumerate(percentiles)
    ]


def spec_windows(windows: Sequence[WindowSpec], time_column: str = "event_ts") -> Column:
    """Per reading, an array of the windows of every spec that hold it: `window_s`, `slide_s`,
    `start` and `end` (timestamps), as `window(time_column, length, slide)` computes them
    (aligned to the epoch; a reading is in [start, end))."""
    micros = F.unix_micros(time_column)
    items = []
    for spec in windows:
        length, slide = spec.length_ms * 1000, spec.slide_ms * 1000
        last_start = micros - F.pmod(micros, F.lit(slide))
        for k in range(math.ceil(length / slide)):
            start = last_start - k * slide
            items.append(
                F.struct(
                    F.lit(spec.length_ms // 1000).alias("window_s"),
                    F.lit(spec.slide_ms // 1000).alias("slide_s"),
                    F.timestamp_micros(start).alias("start"),
                    F.timestamp_micros(start + length).alias("end"),
                )
            )
    return F.filter(F.array(*items), lambda w: w["end"] > F.col(time_column))


def vehicle_stats(
    readings: DataFrame,
    windows: Sequence[WindowSpec],
    signals: Sequence[str],
    percentiles: Sequence[float],
    accuracy: int = 10_000,
) -> DataFrame:
    """One row per vehicle per window of every spec (see the module docstring)."""
    # The window column carries the event time's watermark, as `window()`'s does: the
    # aggregation then emits and evicts a window once the watermark passes its end.
    watermark = readings.schema["event_ts"].metadata
    exploded = readings.select("*", F.explode(spec_windows(windows)).alias("w")).select(
        "*",
        F.col("w.window_s").alias("window_s"),
        F.col("w.slide_s").alias("slide_s"),
        F.struct("w.start", "w.end").alias("window", metadata=watermark),
    )
    return (
        exploded.groupBy("vehicle_id", "window_s", "slide_s", "window")
        .agg(
            F.count(F.lit(1)).alias("readings"),
            F.min("event_time").alias("first_event_time"),
            F.max("event_time").alias("last_event_time"),
            *_aggregates(signals, percentiles, accuracy),
        )
        .select(
            F.lit(STATS_SCHEMA).alias("schema"),
            "vehicle_id",
            *window_bounds(),
            "window_s",
            "slide_s",
            "readings",
            "first_event_time",
            "last_event_time",
            *(F.col(f"{s}_{suffix}") for s in signals for suffix in STAT_SUFFIXES),
            *_percentile_columns(signals, percentiles),
        )
        .select(*STATS_LEAD, *stat_columns(signals, percentiles))
    )


def vehicle_trips(readings: DataFrame, gap: str) -> DataFrame:
    """One row per vehicle per session of readings no more than `gap` apart."""
    return (
        readings.groupBy("vehicle_id", F.session_window("event_ts", gap).alias("session"))
        .agg(
            F.count(F.lit(1)).alias("readings"),
            F.min("event_time").alias("start_event_time"),
            F.max("event_time").alias("end_event_time"),
            (F.max("odometer_km") - F.min("odometer_km")).alias("distance_km"),
            F.max("speed_kmh").alias("max_speed_kmh"),
            F.avg("speed_kmh").alias("mean_speed_kmh"),
            F.array_sort(F.collect_set("trip_id")).alias("trip_ids"),
        )
        .select(
            F.lit(TRIPS_SCHEMA).alias("schema"),
            "vehicle_id",
            F.unix_millis(F.col("session.start")).alias("session_start"),
            F.unix_millis(F.col("session.end")).alias("session_end"),
            "start_event_time",
            "end_event_time",
            ((F.col("end_event_time") - F.col("start_event_time")) / 1000.0).alias("duration_s"),
            F.round("distance_km", 3).alias("distance_km"),
            "max_speed_kmh",
            "mean_speed_kmh",
            "readings",
            "trip_ids",
        )
    )
