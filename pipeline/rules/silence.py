"""`detectors.series.silence` in Spark's engine: a gap of many of the device's own intervals.

Same rule, evidence and key (both event ids around the gap) as the Python forms: the gap
before reading `j` fires when the device's interval (the median of the `history` gaps before
it) is over 0, the gap exceeds `min_intervals` of it, and the sequence numbers around it step
by exactly 1 (a null `seq` never does).

Differs by design: a gap is judged only in a window holding its whole history, the `history`
gaps before it (window index `history + 1` or more), so
- the gaps among a key's first `history + 1` readings are not judged (the Python forms judge
  them from `min_history` gaps on);
- a silence is alerted only where it and the `history` gaps before it span at most
  `span_covered_ms(window, slide)`: a longer silence is not alerted.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from detectors import SilenceParams
from detectors.series.silence import LABEL, RULE, SEQ
from pipeline.rules.alert_rows import ALERTS, alert, evidence_json, params_columns
from pipeline.rules.windows import ID, TIME, indices


def median(values: Column, n: int) -> Column:
    """The median of an array of `n` numbers (the mean of the middle two for even `n`).

    `statistics.median`, as the stateful form learns the interval."""
    ordered = F.array_sort(values)
    if n % 2:
        return ordered[n // 2].cast("double")
    return (ordered[n // 2 - 1] + ordered[n // 2]) / 2.0


def gap(readings: Column, j: Column) -> Column:
    """The gap in event time before reading `j` (`j >= 1`)."""
    return readings[j][TIME] - readings[j - 1][TIME]


def may_fire(readings: Column, params: SilenceParams) -> Column:
    """False where no gap can fire: a firing gap exceeds `min_intervals` times the median of
    gaps, so it exceeds `min_intervals` times the window's shortest gap."""
    gaps = F.transform(indices(readings, 1), lambda j: gap(readings, j))
    return F.array_max(gaps) > F.lit(params.min_intervals) * F.array_min(gaps)


def silence_alerts(
    entity: Column, readings: Column, params: SilenceParams, label: str | None = LABEL
) -> Column:
    """Array of alert structs of the silences in `readings` (sorted structs with `seq`, as a
    column reference: a lambda re-evaluates an array expression at every element)."""
    h = params.history
    judged = indices(readings, h + 1)

    def candidate(j: Column) -> Column:
        previous, current = readings[j - 1], readings[j]
        history = F.transform(F.sequence(j - h, j - 1), lambda k: gap(readings, k))
        interval = median(history, h)
        return F.struct(
            j.alias("j"),
            gap(readings, j).alias("gap"),
            interval.alias("interval"),
            (current[SEQ] - previous[SEQ]).alias("seq_step"),
        )

    def fires(c: Column) -> Column:
        long_gap = c["gap"] > F.lit(params.min_intervals) * c["interval"]
        return F.coalesce((c["interval"] > 0) & long_gap & (c["seq_step"] == 1), F.lit(False))

    fired = F.filter(F.transform(judged, candidate), fires)

    def to_alert(c: Column) -> Column:
        previous, current = readings[c["j"] - 1], readings[c["j"]]
        evidence = evidence_json(
            [
                (c["gap"] / 1000.0).alias("silent_s"),
                (c["interval"] / 1000.0).alias("interval_s"),
                (c["gap"] / c["interval"]).alias("intervals"),
                *params_columns(params.model_dump()),
            ]
        )
        ids = F.array(previous[ID], current[ID])
        key = [previous[ID], current[ID]]
        return alert(RULE, label, entity, current[TIME], ids, evidence, key)

    # the per-gap medians only over windows where a gap can fire (most have none)
    some = F.coalesce(may_fire(readings, params), F.lit(False))
    return F.when(some, F.transform(fired, to_alert)).otherwise(F.array().cast(ALERTS))
