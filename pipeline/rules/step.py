"""`detectors.series.step` in Spark's engine: consecutive readings of a window's sorted array.

Same rule, evidence and key (signal, both event ids) as the Python forms: a pair fires when
`|value - previous| > max_step + max_rate_per_s * gap_s`. Readings with a null value are
left out first, as the Python forms skip them.

Differs by design: a pair is judged only inside a window holding both readings, so a pair
further apart than `span_covered_ms(window, slide)` (`pipeline.rules.windows`) may go
unjudged: a gap that long raises no step.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from detectors import StepParams
from detectors.series.step import RULE
from pipeline.rules.alert_rows import alert, evidence_json, params_columns
from pipeline.rules.windows import ID, TIME, indices


def step_alerts(
    entity: Column, present: Column, signal: str, params: StepParams, label: str | None
) -> Column:
    """Array of alert structs of the pairs in `present` (`pipeline.rules.windows.with_value`,
    as a column reference: a lambda re-evaluates an array expression at every element)."""
    fired = F.filter(
        indices(present, 1), lambda j: fires(present[j - 1], present[j], signal, params)
    )
    return F.transform(
        fired, lambda j: pair_alert(entity, present[j - 1], present[j], signal, params, label)
    )


def fires(previous: Column, current: Column, signal: str, params: StepParams) -> Column:
    """`detectors.series.step.step_fires` on two reading structs."""
    gap_s = (current[TIME] - previous[TIME]) / 1000.0
    delta = current[signal] - previous[signal]
    return F.abs(delta) > F.lit(params.max_step) + F.lit(params.max_rate_per_s) * gap_s


def pair_alert(
    entity: Column,
    previous: Column,
    current: Column,
    signal: str,
    params: StepParams,
    label: str | None,
) -> Column:
    evidence = evidence_json(
        [
            F.lit(signal).alias("signal"),
            previous[signal].cast("double").alias("previous"),
            current[signal].cast("double").alias("value"),
            (current[signal] - previous[signal]).cast("double").alias("delta"),
            ((current[TIME] - previous[TIME]) / 1000.0).alias("gap_s"),
            *params_columns(params.model_dump()),
        ]
    )
    ids = F.array(previous[ID], current[ID])
    key = [F.lit(signal), previous[ID], current[ID]]
    return alert(RULE, label, entity, current[TIME], ids, evidence, key)
