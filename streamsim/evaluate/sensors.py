"""The sensors detections that `streamsim evaluate sensors` scores: the batch forms
of `detectors.series`' `flatline` (stuck sensor), `step` (spike) and `silence`
(silent device), per sensor, over the run's `sensors.readings` read to its end, each event
once. The rules and their parameters live once in `pipeline.jobs.sensors.rules`
(`sensors` runs them streaming).

Parameters come from physical reasoning, not from the generator's injected faults:
- Stuck sensor: a live sensor's output carries noise, so its whole reading (temperature at
  0.01 °C and humidity at 0.1 %, both quantised) rarely repeats bit for bit: with noise of a
  few tenths of a degree and about one percent, two consecutive readings match by chance about
  once in 4,000 pairs (hundreds of times a run over a fleet), three in a row about once in
  10 million. The flatline runs over both at once (`STATE`: equal only when both are) and
  fires at the third identical reading (`STUCK.min_readings`), whatever the interval.
- Spike: ambient air does not move by degrees within seconds (the daily swing is a few °C
  over hours), so two consecutive readings more than 3 °C apart (6 noise floors of 0.5 °C,
  `SPIKE.max_step`) plus 0.01 °C per second of the gap between them (36 °C an hour, far above
  any weather) are a step. A spike shows as two steps, into it and back out, so one already
  running at a sensor's first reading still shows at its end; no baseline or warm-up needed.
- Silent device: a gap in event time longer than 4 of the device's own intervals (the median
  of its last 8 gaps, judged from its first gap on; `SILENT`). Picked on the tuning seeds:
  3 intervals let double drops fire, 4.5 and up lost silences of a slow device; waiting for
  3 gaps before judging lost silences in a device's first readings and saved no false
  alert. A single or double dropped reading leaves a gap of 2 or 3 intervals. Judged in
  event time, so a flushed outage fills its gap; and only across consecutive sequence numbers
  (`seq`: the device made no reading in between), so readings lost for good (a full outage
  buffer) or stamped elsewhere (a legacy logger's clock reset puts them in 2000) are no
  silence. Without that condition, 75-92 of a report seed's false silences were clock resets
  (precision 0.32).
The injected spike size, fault durations and fault rates were not consulted. Tuning split:
`config/suites/sensors-tuning.yaml` (seeds 31-33); figures quoted from
`config/suites/sensors-report.yaml` (seeds 41-43). Stuck faults now last as long as they do
in the field (tens of minutes and more), so the ones of one or two delivered readings that
no rule can see are rare.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from core.config import StackConfig
from core.contracts import topics
from detectors.alert import frame_to_alerts
from pipeline.config import PipelineConfig
from pipeline.jobs.sensors.rules import sensor_alerts_batch
from streamsim.evaluate import shipping

COLUMNS = ("event_id", "sensor_id", "event_time", "seq", "temperature_c", "humidity_pct")
#: Incidents running at the end (last reading within `RUNNING_MS`: sensors report every
#: 4-12 s) that began less than `HORIZON_MS` before it are open: a stuck sensor needs three
#: readings (up to 36 s apart at the slowest interval) to show.
HORIZON_MS = 60_000
RUNNING_MS = 15_000


def run_rules(readings: pd.DataFrame) -> pd.DataFrame:
    """The fault rules over the readings (one row per event), as one alert frame: the stuck,
    spike and silence rules of `sensors`' alerts query
    (`pipeline.jobs.sensors.rules`), in batch form."""
    return sensor_alerts_batch(readings, low_battery=False)


def engine_rules(events: Path, cfg: PipelineConfig, stack: StackConfig) -> pd.DataFrame:
    """`run_rules` in the engine form the job runs with `rules_form: engine`
    (`pipeline.jobs.sensors.engine.batch_alerts`, a local Spark batch) over a run's
    `events.jsonl` (each event id once, as the form keeps it), low battery left out."""
    from pipeline.jobs.sensors.engine import LOW_LABEL, batch_alerts
    from pipeline.jobs.sensors.job import event_schema
    from pipeline.rules.alert_rows import with_alert_ids
    from pipeline.session import spark_session

    spark = spark_session(stack, app="evaluate-sensors")
    frame = spark.read.schema(event_schema("sensor_id", sensor_fields=True)).json(str(events))
    settings = cfg.sensors
    alerts = batch_alerts(frame, "sensor_id", settings.rules_window, settings.rules_slide)
    rows = with_alert_ids(alerts.where(alerts.label != LOW_LABEL).toPandas())
    return rows.reset_index(drop=True)


def detections(readings: pd.DataFrame, truth: pd.DataFrame) -> pd.DataFrame:
    """One row per alert with when it could have been raised (see `shipping.detections`)."""
    return alert_detections(run_rules(readings), truth)


def alert_detections(alerts: pd.DataFrame, truth: pd.DataFrame) -> pd.DataFrame:
    """`detections` of alerts already raised (`run_rules`' frame)."""
    return shipping.detections(
        frame_to_alerts(alerts) if len(alerts) else [], pd.DataFrame(), truth
    )


def batch_detections(
    stack: StackConfig,
    prefix: str,
    truth: pd.DataFrame,
    since: Mapping[str, Mapping[int, int]] | None = None,
) -> pd.DataFrame:
    """The sensor rules' detections over the run's readings (read to their end)."""
    topic = topics.SENSORS_READINGS.name
    readings = shipping.read_frame(stack, topic, COLUMNS, prefix, (since or {}).get(topic))
    return detections(readings.drop_duplicates("event_id", ignore_index=True), truth)
