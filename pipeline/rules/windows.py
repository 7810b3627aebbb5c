"""A key's readings per event-time window, as one array sorted by (event time, event id).

The rule forms of `pipeline.rules` judge consecutive readings inside such an array. A sliding
window of length `window` and step `slide` holds every stretch of readings spanning at most
`window - slide` whole (see `span_covered_ms`); overlapping windows judge the same readings
more than once, and the alert ids, derived from the readings, make those repeats one alert.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

#: Field names of every reading struct (the rule's own value fields follow them).
TIME, ID = "event_time", "event_id"


def reading(fields: Sequence[str]) -> Column:
    """One reading as a struct: event time first, then event id, then `fields`: the order
    `array_sort` sorts by."""
    return F.struct(F.col(TIME), F.col(ID), *(F.col(name) for name in fields))


def windowed_readings(
    events: DataFrame,
    entity: str,
    fields: Sequence[str],
    window: str,
    slide: str,
    time_col: str = "event_ts",
    missing: Sequence[str] = (),
) -> DataFrame:
    """`entity`, `window` and `readings` (sorted array of `reading(fields)`) per key and
    sliding event-time window of `events` (with its watermark, if streaming); per signal of
    `missing`, `missing_<signal>`: its readings that are null or NaN (`with_value`)."""
    counts = [F.count_if(is_missing(F.col(s))).alias(f"missing_{s}") for s in missing]
    return events.groupBy(F.col(entity), F.window(time_col, window, slide)).agg(
        F.array_sort(F.collect_list(reading(fields))).alias("readings"), *counts
    )


def span_covered_ms(window_ms: int, slide_ms: int) -> int:
    """The longest span of event time (first to last reading) that some window always holds
    whole.

    >>> span_covered_ms(600_000, 60_000)
    540000
    """
    return window_ms - slide_ms


def indices(readings: Column, first: int) -> Column:
    """The indexes `first`, `first + 1`, ... of `readings` (empty when it is shorter): an int
    array, cheaper for a lambda to walk than structs of the readings."""
    last = F.size(readings) - 1
    return F.when(last >= first, F.sequence(F.lit(first), last)).otherwise(
        F.array().cast("array<int>")
    )


def is_missing(value: Column) -> Column:
    """A value no rule judges: null or NaN."""
    return value.isNull() | F.isnan(value)


def with_value(readings: Column, signal: str) -> Column:
    """The readings whose `signal` is neither null nor NaN, where the window's
    `missing_<signal>` count (`windowed_readings`) says some are not; else `readings` itself.
    The count comes from the aggregation, so a window with every value present (most) costs
    no pass of a lambda over its array."""
    some = F.col(f"missing_{signal}") > 0
    return F.when(some, F.filter(readings, lambda r: ~is_missing(r[signal]))).otherwise(readings)


def indexed(readings: Column) -> Column:
    """`readings` as structs of (i, r, p): index, the reading and the one before it (null at
    index 0)."""
    return F.transform(
        readings,
        lambda r, i: F.struct(
            i.alias("i"),
            r.alias("r"),
            F.when(i > 0, readings[i - 1]).alias("p"),
        ),
    )
