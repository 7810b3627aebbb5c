"""`detectors.cards.velocity` in Spark's engine: card testing over sliding-window aggregates.

Per card and window (of `VelocityParams.window_s`, sliding by the job's `rule_slide`), Spark's
own aggregates: the count, `count_if(amount < small_amount)`, the sum, and
`approx_count_distinct(merchant)`, and the same three features over the window's events
before its last slide (`prior_*`). The predicate is the detector's `velocity_fires`, on
Columns; a window fires at the first crossing of a burst, where it fires and its prior
features do not (`detectors.features.first_crossing`, as the Python operator judges). Key,
event ids, event time and evidence are `check_velocity_window`'s, so each alert has the id the
Python form gives the same window.

Differs by design: distinct merchants are HyperLogLog++ estimates (`distinct_rsd`), exact
only in the Python form; with the default `min_distinct_merchants` (1) that never changes a
verdict.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from detectors import VelocityParams
from detectors.cards.velocity import LABEL, RULE, velocity_fires
from pipeline.rules.alert_rows import alert, evidence_json, params_columns


def velocity_first_crossing(params: VelocityParams) -> Column:
    """The window fires and did not without its last slide (`first_crossing`)."""
    fires = velocity_fires(
        F.col("tx_count"), F.col("small_count"), F.col("distinct_merchants"), params
    )
    before = velocity_fires(
        F.col("prior_tx_count"),
        F.col("prior_small_count"),
        F.col("prior_distinct_merchants"),
        params,
    )
    return fires & ~before


def velocity_alert(
    entity: Column,
    window_start: Column,
    window_end: Column,
    last_event_time: Column,
    event_ids: Column,
    params: VelocityParams,
) -> Column:
    """The alert struct of a firing window (`check_velocity_window`'s fields; `event_ids`
    sorted)."""
    evidence = evidence_json(
        [
            F.col("tx_count").cast("long").alias("tx_count"),
            F.col("small_count").cast("long").alias("small_count"),
            F.round(F.col("amount_sum").cast("double"), 6).alias("amount_sum"),
            F.col("distinct_merchants").cast("long").alias("distinct_merchants"),
            *params_columns(params.model_dump()),
            window_start.alias("window_start"),
            window_end.alias("window_end"),
        ]
    )
    key = [F.lit("window"), window_start, window_end, event_ids[0]]
    return alert(RULE, LABEL, entity, last_event_time, event_ids, evidence, key)
