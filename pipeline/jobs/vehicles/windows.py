"""Per-vehicle window statistics and trip summaries in Spark SQL.

Inputs are watermarked, de-duplicated `vehicle.telemetry/1` readings (`vehicle_id`, `event_id`,
`event_time` ms, `event_ts`, the signals). The same functions build the streaming queries and the
batch oracle (`pipeline.jobs.vehicles.parity`): on a batch DataFrame, `withWatermark` does
nothing and `dropDuplicatesWithinWatermark` drops every duplicate.

- `vehicle_stats`: per vehicle and event-time window of each spec (tumbling or sliding), the
  number of readings and, per signal, mean, min, max and percentile levels (KLL sketches)
  (`<signal>_mean`, `_min`, `_max`, `_p50`, ...)                -> `aggregates.vehicle-stats`
- `vehicle_trips`: per vehicle and `session_window` (a silence longer than the gap ends a
  trip): start and end event times, duration, distance (odometer delta), max and mean speed,
  readings, the device's trip ids                                -> `aggregates.vehicle-trips`

`vehicle_stats` aggregates each reading once, into its 1-minute partial (per vehicle and
`partial_ms(specs)`-long tumbling window: the greatest common divisor of every spec's length and
slide), then merges the partials into the windows of every spec: a partial lies inside a window
whole, so the tumbling 1-minute rows and the 5-minute sliding ones (five windows per partial)
come from one merge, and a reading is touched once instead of once per window. Two chained
append-mode aggregations in one query (the partials' `window_time` carries the watermark to the
merge), so the input is read, parsed and de-duplicated once (one aggregation per spec, unioned,
would need a watermarked, de-duplicated stream each: Spark 4.2 advances the watermark of only
the first of several aggregations fed by one watermark node).

Partials: readings, first and last event time, and per signal its sum, count, min, max and a
KLL quantile sketch (`kll_sketch_agg_double`, Apache DataSketches); the merge adds the sums and
counts (mean = sum / count), takes min of mins and max of maxes, and merges the sketches
(`kll_merge_agg_double`) before reading the percentile levels
(`kll_sketch_get_quantile_double`, the smallest value whose rank reaches the level). A KLL
sketch holds every value until it passes `sketch_k` values; below that (300 readings per
signal in a 5-minute window at 1 Hz against the default 1,024) the percentiles are exact, and
stream and batch agree to the value. Above it the sketch compacts (randomly) and the rank error
is bounded: about 1.33 / k^0.9 (0.25% at k = 1,024).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.event_windows import event_window, explode_spec_windows, window_bounds
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


#: KLL's k: a sketch is exact up to k values (see the module docstring).
SKETCH_K = 1_024


def partial_ms(windows: Sequence[WindowSpec]) -> int:
    """The length of the partials every spec's windows are merged from: the greatest common
    divisor of the lengths and slides, so each window is a whole number of partials.

    >>> partial_ms([WindowSpec(length="1 minute"),
    ...     WindowSpec(length="5 minutes", slide="1 minute")])
    60000
    >>> partial_ms([WindowSpec(length="90 seconds", slide="1 minute")])
    30000
    """
    return math.gcd(*(n for spec in windows for n in (spec.length_ms, spec.slide_ms)))


def _reading_span() -> list[Column]:
    return [
        F.count(F.lit(1)).alias("readings"),
        F.min("event_time").alias("first_event_time"),
        F.max("event_time").alias("last_event_time"),
    ]


def _partial_aggregates(signals: Sequence[str], sketch_k: int | None) -> list[Column]:
    columns: list[Column] = []
    for signal in signals:
        value = F.col(signal).cast("double")
        columns += [
            F.sum(value).alias(f"{signal}__sum"),
            F.count(value).alias(f"{signal}__n"),
            F.min(value).alias(f"{signal}_min"),
            F.max(value).alias(f"{signal}_max"),
        ]
        if sketch_k is not None:
            columns.append(F.kll_sketch_agg_double(value, sketch_k).alias(f"{signal}__kll"))
    return columns


def _merged_aggregates(signals: Sequence[str], percentiles: Sequence[float]) -> list[Column]:
    columns: list[Column] = []
    for signal in signals:
        count = F.sum(f"{signal}__n")
        columns += [
            F.when(count > 0, F.try_divide(F.sum(f"{signal}__sum"), count)).alias(f"{signal}_mean"),
            F.min(f"{signal}_min").alias(f"{signal}_min"),
            F.max(f"{signal}_max").alias(f"{signal}_max"),
        ]
        if percentiles:
            columns += [
                count.alias(f"{signal}__n"),
                F.kll_merge_agg_double(f"{signal}__kll").alias(f"{signal}__kll"),
            ]
    return columns


def _percentile_columns(signals: Sequence[str], percentiles: Sequence[float]) -> list[Column]:
    columns: list[Column] = []
    for signal in signals:
        sketch = F.col(f"{signal}__kll")
        for q in percentiles:
            level = F.kll_sketch_get_quantile_double(sketch, F.lit(float(q)))
            columns.append(
                F.when(F.col(f"{signal}__n") > 0, level).alias(f"{signal}_{percentile_name(q)}")
            )
    return columns


def vehicle_partials(
    readings: DataFrame,
    windows: Sequence[WindowSpec],
    signals: Sequence[str],
    sketch_k: int | None = SKETCH_K,
) -> DataFrame:
    """Per vehicle and `partial_ms(windows)` tumbling window: readings, first and last event
    time, and per signal `<signal>__sum`, `__n`, `_min`, `_max` (and `__kll`, a sketch, unless
    `sketch_k` is None); `partial_ts` is the partial's `window_time` (watermarked)."""
    return (
        readings.groupBy("vehicle_id", event_window(partial_ms(windows)).alias("partial"))
        .agg(*_reading_span(), *_partial_aggregates(signals, sketch_k))
        .withColumn("partial_ts", F.window_time("partial"))
    )


def vehicle_stats(
    readings: DataFrame,
    windows: Sequence[WindowSpec],
    signals: Sequence[str],
    percentiles: Sequence[float],
    sketch_k: int = SKETCH_K,
) -> DataFrame:
    """One row per vehicle per window of every spec (see the module docstring)."""
    partials = vehicle_partials(readings, windows, signals, sketch_k if percentiles else None)
    return (
        explode_spec_windows(partials, windows, "partial_ts")
        .groupBy("vehicle_id", "window_s", "slide_s", "window")
        .agg(
            F.sum("readings").alias("readings"),
            F.min("first_event_time").alias("first_event_time"),
            F.max("last_event_time").alias("last_event_time"),
            *_merged_aggregates(signals, percentiles),
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


def vehicle_stats_provisional(
    readings: DataFrame,
    windows: Sequence[WindowSpec],
    signals: Sequence[str],
    percentiles: Sequence[float],
    sketch_k: int = SKETCH_K,
) -> DataFrame:
    """`vehicle_stats`' rows from one aggregation over every spec's windows, for update mode
    (Spark takes chained aggregations in append mode only): the partials' aggregates taken
    over each window that holds a reading, not over its 1-minute partial."""
    sketches = sketch_k if percentiles else None
    return (
        explode_spec_windows(readings, windows)
        .groupBy("vehicle_id", "window_s", "slide_s", "window")
        .agg(*_reading_span(), *_partial_aggregates(signals, sketches))
        .select(
            F.lit(STATS_SCHEMA).alias("schema"),
            "vehicle_id",
            *window_bounds(),
            *STATS_LEAD[4:],
            *(
                F.when(
                    F.col(f"{s}__n") > 0, F.try_divide(F.col(f"{s}__sum"), F.col(f"{s}__n"))
                ).alias(f"{s}_mean")
                for s in signals
            ),
            *(F.col(f"{s}_{suffix}") for s in signals for suffix in STAT_SUFFIXES[1:]),
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
