"""`detectors.series.flatline` in Spark's engine: a signal that stops changing (no speed).

Same rule, evidence and key (signal, the run's first event id) as the Python forms with
`speed_col=None` (every reading counts as moving): a run's values stay within `epsilon` of
its first value (anchor); a further value or a gap over `max_gap_s` starts a new run; it fires
once, at the first reading with `min_readings` readings and `min_duration_s` in the run.
Readings with a null or NaN value are left out first.

Differs by design: a window's first readings may continue a run anchored before the window,
on a value the window does not hold. A run is judged only from the window's first *certain
break* on (a step of more than `2 * epsilon` from the previous reading, or a gap over
`max_gap_s`: the true run breaks there whatever its anchor). The window's first reading is one
when it comes more than `max_gap_s` after the window's start: any reading before it lies
before the start, so the gap to it is longer still. So
- with `max_gap_s` unset, a run that starts at a key's very first reading, or after a reading
  more than `span_covered_ms(window, slide)` earlier, is not alerted (with `max_gap_s` under
  `span_covered_ms`, an earlier window starts long enough before it);
- a run is alerted only where it fires within a window holding the break before it.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from detectors import FlatlineParams
from detectors.series.flatline import LABEL, RULE
from pipeline.rules.alert_rows import ALERTS, alert, evidence_json, params_columns
from pipeline.rules.runs import run_evidence_columns, run_fires, run_ids
from pipeline.rules.windows import ID, TIME, indices


def certain_break(previous: Column, current: Column, signal: str, params: FlatlineParams) -> Column:
    """True where any run breaks between two consecutive readings, whatever its anchor (as
    `detectors.series.flatline.flatline_runs` cuts)."""
    step = F.abs(current[signal] - previous[signal]) > F.lit(2.000001 * params.epsilon + 1e-12)
    if params.max_gap_s is None:
        return step
    return step | (current[TIME] - previous[TIME] > F.lit(params.max_gap_s * 1000))


def first_break(
    readings: Column, signal: str, params: FlatlineParams, window_start: Column | None = None
) -> Column:
    """The index of the first certain break (the array's size when none); 0 when the first
    reading comes more than `max_gap_s` after `window_start` (ms)."""
    cuts = F.filter(
        indices(readings, 1), lambda i: certain_break(readings[i - 1], readings[i], signal, params)
    )
    first = F.coalesce(F.array_min(cuts), F.size(readings))
    if params.max_gap_s is None or window_start is None:
        return first
    opens = readings[0][TIME] - window_start > F.lit(params.max_gap_s * 1000)
    return F.when(opens, F.lit(0)).otherwise(first)


def may_fire(readings: Column, signal: str, params: FlatlineParams) -> Column:
    """False where no run can fire: a run of two or more readings needs two consecutive
    readings within `epsilon` (the second is that close to the anchor, the first)."""
    if params.min_readings < 2 and params.min_duration_s <= 0:
        return F.lit(True)
    return F.exists(
        indices(readings, 1),
        lambda i: F.abs(readings[i][signal] - readings[i - 1][signal]) <= F.lit(params.epsilon),
    )


def flatline_alerts(
    entity: Column,
    present: Column,
    signal: str,
    params: FlatlineParams,
    label: str | None = LABEL,
    window_start: Column | None = None,
) -> Column:
    """Array of alert structs of the stuck runs in `present` (`pipeline.rules.windows.with_value`,
    as a column reference) of a window starting at `window_start` (ms; see `first_break`)."""
    gap_ms = None if params.max_gap_s is None else params.max_gap_s * 1000
    fires = run_fires(
        present,
        met=lambda r: F.lit(True),
        breaks=lambda acc, r: F.abs(r[signal] - acc["anchor"]) > F.lit(params.epsilon),
        anchor=lambda r: r[signal],
        min_count=params.min_readings,
        min_duration_ms=params.min_duration_s * 1000,
        max_gap_ms=gap_ms,
        exact_from=first_break(present, signal, params, window_start),
    )

    def to_alert(fire: Column) -> Column:
        fields = run_evidence_columns(present, fire, signal)
        evidence = evidence_json([*fields, *params_columns(params.model_dump())])
        key = [F.lit(signal), present[fire["s"]][ID]]
        ids = run_ids(present, fire)
        return alert(RULE, label, entity, present[fire["i"]][TIME], ids, evidence, key)

    # the runs' pass only over windows where a run can fire (most have none)
    some = may_fire(present, signal, params)
    return F.when(some, F.transform(fires, to_alert)).otherwise(F.array().cast(ALERTS))
