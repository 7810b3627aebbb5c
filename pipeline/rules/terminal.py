"""`detectors.cards.terminal` in Spark's engine: compromised terminal over sliding windows.

Per terminal (or merchant, `terminal_key`) and window (of `TerminalParams.window_s`, sliding by
the job's `rule_slide`): `approx_count_distinct(card)`, the count, and the distinct cards
before the window's last slide. The predicate is the detector's `terminal_fires`, on Columns;
a window fires at the first crossing of a burst (`detectors.features.first_crossing`). Key,
event ids, event time and evidence are `check_terminal_window`'s, so each alert has the id the
Python form gives the same window.

Differs by design: distinct cards are HyperLogLog++ estimates (`distinct_rsd`); the Python
form counts them exactly. Near `min_distinct_cards` (10 by default) an estimate one off can
fire a window one slide sooner or later (another window id), or not at all.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from detectors import TerminalParams
from detectors.cards.terminal import LABEL, RULE, terminal_fires
from pipeline.rules.alert_rows import alert, evidence_json, params_columns


def terminal_first_crossing(params: TerminalParams) -> Column:
    """The window fires and did not without its last slide (`first_crossing`)."""
    return terminal_fires(F.col("distinct_cards"), params) & ~terminal_fires(
        F.col("prior_distinct_cards"), params
    )


def terminal_alert(
    entity: Column,
    window_start: Column,
    window_end: Column,
    last_event_time: Column,
    event_ids: Column,
    params: TerminalParams,
) -> Column:
    """The alert struct of a firing window (`check_terminal_window`'s fields; `event_ids`
    sorted)."""
    evidence = evidence_json(
        [
            F.col("distinct_cards").cast("long").alias("distinct_cards"),
            F.col("tx_count").cast("long").alias("tx_count"),
            window_start.alias("window_start"),
            window_end.alias("window_end"),
            *params_columns(params.model_dump()),
        ]
    )
    key = [F.lit("window"), window_start, window_end, event_ids[0]]
    return alert(RULE, LABEL, entity, last_event_time, event_ids, evidence, key)
