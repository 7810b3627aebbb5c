"""Event-time window columns shared by the jobs: Spark interval strings, `window()` over
`event_ts` (tumbling or sliding), the windows of several specs per row (`spec_windows`,
`explode_spec_windows`), and window bounds as epoch ms."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.settings import WindowSpec


def spark_interval(ms: int) -> str:
    """A Spark interval string for a whole number of milliseconds.

    >>> spark_interval(600_000), spark_interval(1_500)
    ('600 seconds', '1500 milliseconds')
    """
    return f"{ms // 1000} seconds" if ms % 1000 == 0 else f"{ms} milliseconds"


def event_window(length_ms: int, slide_ms: int | None = None, column: str = "event_ts") -> Column:
    """`window(column, length[, slide])`: tumbling when `slide_ms` is unset or the length."""
    length = spark_interval(length_ms)
    if slide_ms is None or slide_ms == length_ms:
        return F.window(column, length)
    return F.window(column, length, spark_interval(slide_ms))


def window_bounds(column: str = "window") -> list[Column]:
    """`window_start` and `window_end` of a window struct column, as epoch ms."""
    return [
        F.unix_millis(F.col(f"{column}.start")).alias("window_start"),
        F.unix_millis(F.col(f"{column}.end")).alias("window_end"),
    ]


def spec_windows(windows: Sequence[WindowSpec], time_column: str = "event_ts") -> Column:
    """Per row, an array of the windows of every spec that hold its time: `window_s`,
    `slide_s`, `start` and `end` (timestamps), as `window(time_column, length, slide)` computes
    them (aligned to the epoch; a time is in [start, end))."""
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


def explode_spec_windows(
    frame: DataFrame, windows: Sequence[WindowSpec], time_column: str = "event_ts"
) -> DataFrame:
    """`frame` with a row per window of every spec that holds its `time_column`, and columns
    `window_s`, `slide_s` and `window` (start, end). `window` carries the time column's
    watermark, as `window()`'s does, so an aggregation grouped by it emits and evicts each
    window once the watermark passes its end: every spec in one aggregation."""
    watermark = frame.schema[time_column].metadata
    return frame.select("*", F.explode(spec_windows(windows, time_column)).alias("w")).select(
        *frame.columns,
        F.col("w.window_s").alias("window_s"),
        F.col("w.slide_s").alias("slide_s"),
        F.struct("w.start", "w.end").alias("window", metadata=watermark),
    )
