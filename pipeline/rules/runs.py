"""`detectors.runs.RunTracker` in Spark's engine: where runs fire in a sorted readings array.

One `aggregate` pass over the array carries the run (its start index and time, its count,
whether it fired, the previous reading's time, an anchor value for rules that compare with
the run's first value) and collects `(s, i)`: the run starting at index `s` fired at index
`i`. A window's first readings may continue a run that began before the window; the caller
says from which index a run's start is certain (`exact_from`), and only runs starting there
or later are kept.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline.rules.windows import ID, TIME, indexed

#: (the run so far, the reading) -> a Column.
RunTest = Callable[[Column, Column], Column]
FIRE = "array<struct<s:int,i:int>>"


def run_fires(
    readings: Column,
    met: Callable[[Column], Column],
    breaks: RunTest,
    anchor: Callable[[Column], Column],
    min_count: int,
    min_duration_ms: float,
    max_gap_ms: float | None,
    exact_from: Column,
) -> Column:
    """Array of `(s, i)` structs, one per firing run (see the module docstring)."""
    start = F.struct(
        F.lit(-1).alias("start"),
        F.lit(0).cast("long").alias("start_time"),
        F.lit(0).alias("count"),
        F.lit(False).alias("fired"),
        F.lit(None).cast("long").alias("last"),
        F.lit(0.0).cast("double").alias("anchor"),
        F.array().cast(FIRE).alias("fires"),
    )

    def merge(acc: Column, x: Column) -> Column:
        r, i = x["r"], x["i"]
        t = r[TIME]
        gap = F.lit(False)
        if max_gap_ms is not None:
            gap = F.coalesce(t - acc["last"] > F.lit(max_gap_ms), F.lit(False))
        ok = met(r)
        fresh = ok & ((acc["start"] < 0) | gap | breaks(acc, r))
        run_start = F.when(~ok, F.lit(-1)).when(fresh, i).otherwise(acc["start"])
        start_time = F.when(fresh, t).otherwise(acc["start_time"])
        count = F.when(~ok, F.lit(0)).when(fresh, F.lit(1)).otherwise(acc["count"] + 1)
        before = F.when(fresh | ~ok, F.lit(False)).otherwise(acc["fired"])
        fire = ok & ~before & (count >= min_count) & (t - start_time >= F.lit(min_duration_ms))
        fired = F.array(F.struct(run_start.alias("s"), i.alias("i")))
        return F.struct(
            run_start.alias("start"),
            start_time.cast("long").alias("start_time"),
            count.alias("count"),
            (before | fire).alias("fired"),
            t.cast("long").alias("last"),
            F.when(fresh, anchor(r).cast("double")).otherwise(acc["anchor"]).alias("anchor"),
            F.when(fire, F.concat(acc["fires"], fired)).otherwise(acc["fires"]).alias("fires"),
        )

    runs = F.aggregate(indexed(readings), start, merge)
    return F.filter(runs["fires"], lambda f: f["s"] >= exact_from)


def run_ids(readings: Column, fire: Column) -> Column:
    """The event ids of a fired run, its first reading to the firing one."""
    ids = F.transform(readings, lambda r: r[ID])
    return F.slice(ids, fire["s"] + 1, fire["i"] - fire["s"] + 1)


def run_evidence_columns(readings: Column, fire: Column, signal: str) -> list[Column]:
    """`detectors.series.threshold.run_evidence`'s fields but the params."""
    first, last = readings[fire["s"]], readings[fire["i"]]
    return [
        F.lit(signal).alias("signal"),
        last[signal].cast("double").alias("value"),
        (fire["i"] - fire["s"] + 1).alias("readings"),
        ((last[TIME] - first[TIME]) / 1000.0).alias("duration_s"),
    ]
