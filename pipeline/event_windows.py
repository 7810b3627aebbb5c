"""Event-time window columns shared by the jobs: Spark interval strings, `window()` over
`event_ts` (tumbling or sliding), and window bounds as epoch ms."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


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
