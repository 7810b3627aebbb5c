"""The sensor rules of `pipeline.jobs.sensors.rules` in Spark's engine (`rules_form: engine`).

The same four rules, from the same params objects (`STUCK`, `SPIKE`, `LOW_BATTERY`,
`SILENT`), as Column expressions over each sensor's readings per sliding event-time window
(`pipeline.rules`): no Python worker. Alert ids are the Python forms' ids for the same
readings; overlapping windows repeat an alert, and the `AlertSink` writes each id once.
Where the window forms differ from the per-event forms by design, each rule module says how
(`pipeline.rules.step`, `.flatline`, `.threshold`, `.silence`); in short, every rule judges
only readings a window holds whole (spans up to `window - slide`), and the run and history
rules skip what starts at a sensor's first readings.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.jobs.sensors.rules import (
    LABELS,
    LOW,
    LOW_BATTERY,
    LOW_STATUS,
    SILENT,
    SPIKE,
    STATE,
    STUCK,
    reading_state,
)
from pipeline.rules.alert_rows import FIELDS as ALERT_FIELDS
from pipeline.rules.flatline import flatline_alerts
from pipeline.rules.silence import silence_alerts
from pipeline.rules.step import step_alerts
from pipeline.rules.threshold import threshold_alerts
from pipeline.rules.windows import windowed_readings, with_value

#: The per-reading values the engine forms read (besides event time and id).
VALUES = ("temperature_c", STATE, LOW, "seq")
STUCK_LABEL, SPIKE_LABEL, LOW_LABEL, SILENT_LABEL = LABELS


def reading_values(events: DataFrame) -> DataFrame:
    """`events` with `VALUES`: the reading as one number and the low-battery flag added."""
    status = F.col("status")
    temperature = F.col("temperature_c").cast("double")
    return events.withColumns(
        {
            "temperature_c": temperature,
            STATE: reading_state(temperature, F.col("humidity_pct").cast("double")),
            LOW: F.when(status.isNotNull(), (status == LOW_STATUS).cast("double")),
            "seq": F.col("seq").cast("double"),
        }
    )


def rule_readings(readings: Column) -> dict[str, Column]:
    """Stage one: each rule's own array from the sorted readings (a column reference)."""
    return {
        "stuck": with_value(readings, STATE),
        "spike": with_value(readings, "temperature_c"),
        "low": with_value(readings, LOW),
        "silent": readings,
    }


def rule_alerts(entity: Column) -> Column:
    """Stage two: one array of the four rules' alert structs over `rule_readings`' columns."""
    return F.concat(
        flatline_alerts(entity, F.col("stuck"), STATE, STUCK, STUCK_LABEL),
        step_alerts(entity, F.col("spike"), "temperature_c", SPIKE, SPIKE_LABEL),
        threshold_alerts(entity, F.col("low"), LOW, LOW_BATTERY, LOW_LABEL),
        silence_alerts(entity, F.col("silent"), SILENT, SILENT_LABEL),
    )


def window_alerts(events: DataFrame, entity: str, window: str, slide: str) -> DataFrame:
    """Alert rows (`pipeline.rules.alert_rows.FIELDS`, the key text in `alert_id`) of
    `events` (one row per event id, `event_ts` watermarked if streaming), per sensor and
    sliding window. The same alert comes once per window that judges it."""
    windows = windowed_readings(reading_values(events), entity, VALUES, window, slide)
    own = windows.select(entity, *(c.alias(n) for n, c in rule_readings(F.col("readings")).items()))
    alerts = own.select(F.explode(rule_alerts(F.col(entity))).alias("a"))
    return alerts.select(*(F.col("a")[name].alias(name) for name in ALERT_FIELDS))


def batch_alerts(events: DataFrame, entity: str, window: str, slide: str) -> DataFrame:
    """`window_alerts` over a batch DataFrame (each sensor's event id once, as `SensorRules`
    takes it; one row per alert key)."""
    stamped = events.withColumn("event_ts", F.timestamp_millis("event_time"))
    once = stamped.dropDuplicates([entity, "event_id"])
    return window_alerts(once, entity, window, slide).dropDuplicates(["alert_id"])
