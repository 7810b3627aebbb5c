"""`detectors.series.threshold` in Spark's engine: runs of readings beyond a limit.

Same rule, evidence and key (signal, the run's first event id) as the Python forms (see
`pipeline.rules.runs`). Readings with a null value are left out first.

Differs by design: a run is judged only where its start is certain, at a window index of 1 or
more (the reading before it is in the window and ended the previous run, or a gap did). So
- a run that starts at a key's very first reading is not alerted;
- with `max_gap_s=None` (once per episode, whatever the gaps), a run whose first reading
  follows the previous reading by more than `span_covered_ms(window, slide)` is not alerted;
- a run is alerted only where it fires within the window that holds its start (its
  `min_count` readings and `min_duration_s` within `span_covered_ms`).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from detectors import ThresholdParams
from detectors.series.threshold import RULE, beyond
from pipeline.rules.alert_rows import ALERTS, alert, evidence_json, params_columns
from pipeline.rules.runs import run_evidence_columns, run_fires, run_ids
from pipeline.rules.windows import ID, TIME


def threshold_alerts(
    entity: Column,
    present: Column,
    signal: str,
    params: ThresholdParams,
    label: str | None,
) -> Column:
    """Array of alert structs of the runs in `present` (`pipeline.rules.windows.with_value`,
    as a column reference)."""
    gap_ms = None if params.max_gap_s is None else params.max_gap_s * 1000
    fires = run_fires(
        present,
        met=lambda r: beyond(r[signal], params),
        breaks=lambda acc, r: F.lit(False),
        anchor=lambda r: F.lit(0.0),
        min_count=params.min_count,
        min_duration_ms=params.min_duration_s * 1000,
        max_gap_ms=gap_ms,
        exact_from=F.lit(1),
    )

    def to_alert(fire: Column) -> Column:
        fields = run_evidence_columns(present, fire, signal)
        evidence = evidence_json([*fields, *params_columns(params.model_dump())])
        key = [F.lit(signal), present[fire["s"]][ID]]
        ids = run_ids(present, fire)
        return alert(RULE, label, entity, present[fire["i"]][TIME], ids, evidence, key)

    # the runs' pass only over windows with a reading beyond the limit (most have none)
    some = F.exists(present, lambda r: beyond(r[signal], params))
    return F.when(some, F.transform(fires, to_alert)).otherwise(F.array().cast(ALERTS))
