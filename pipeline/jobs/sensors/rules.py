"""Sensors rules per sensor, for `sensors`' alerts query and `evaluate sensors`.

Four detectors from `detectors/series/`, with parameters reasoned from physics (see
`streamsim.evaluate.sensors` for the reasoning):
- `stuck_sensor`: `flatline` over the whole reading as one number (`reading_state`:
  unchanged only when temperature and humidity both are), no speed, third identical reading;
- `spike`: `step` on `temperature_c`;
- `low_battery`: `threshold` on the device's own status (`low_battery_flag`: 1.0
  while it reports `low_battery`), once per episode (a run of low readings, whatever the gaps
  between them); the alert id is the run's first event id, so a replay adds nothing;
- `silent_device`: `silence`: a gap in event time longer than `SILENT.min_intervals`
  of the device's own interval (the median of its last gaps) across which its `seq` goes up by
  one (it made no reading: none lost, none stamped elsewhere), alerted with the reading that
  ends it. A flushed outage fills its gap; a backlog that lands behind the watermark (Spark
  drops it as late, and counts it) leaves a gap its `seq` skips, so no silence either. A
  silence still open at the stream's end is not alerted.

`sensor_alerts_batch` runs the vectorised forms (the batch oracle, and `evaluate`'s stuck and
spike rules); `SensorRules` feeds the stateful forms one sensor's readings in event-time order
in `applyInPandasWithState` (`pipeline.bucketed_rules`), so both give the same
alert ids over the same readings. A sensor's state is its buffered readings (up to the
watermark) and, per rule, the last reading or the current run: a few numbers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from detectors import (
    Alert,
    FlatlineParams,
    FlatlineState,
    SilenceParams,
    SilenceState,
    StepParams,
    StepState,
    ThresholdParams,
    ThresholdState,
    flatline_alerts,
    silence_alerts,
    step_alerts,
    threshold_alerts,
)
from pipeline.buffered_rules import BufferedRules, RulesFactory, input_rows

#: The detectors' canonical entity column is the sensor.
AS_ENTITY = {"entity_id": "sensor_id"}
#: The whole reading as one number (see `reading_state`).
STATE = "reading_state"
#: 1.0 while the sensor reports `LOW_STATUS` (see `low_battery_flag`).
LOW = "low_battery"
LOW_STATUS = "low_battery"
STUCK = FlatlineParams(
    epsilon=1e-3, min_duration_s=1.0, min_speed_kmh=0.0, max_gap_s=60.0, min_readings=3
)
SPIKE = StepParams(max_step=3.0, max_rate_per_s=0.01)
LOW_BATTERY = ThresholdParams(above=0.5, max_gap_s=None)
SILENT = SilenceParams(min_intervals=4.0, history=8, min_history=1)
LABELS = ("stuck_sensor", "spike", "low_battery", "silent_device")
#: The reading fields the rules read, in payload order.
FIELDS = ("temperature_c", "humidity_pct", "status", "seq")
KEY_COLUMNS = ("event_id", "event_time")


def reading_state(temperature: Any, humidity: Any) -> Any:
    """Temperature and humidity as one number, on floats or Series alike: humidity in 0.1
    steps times 1e4 keeps it far above temperature's 0.01 steps.

    >>> reading_state(21.5, 40.2)
    402021.5
    """
    return temperature + 1e4 * humidity


def low_battery_flag(status: pd.Series) -> pd.Series:
    """1.0 where the status is `LOW_STATUS`, 0.0 where it is another, NaN where it is missing.

    >>> low_battery_flag(pd.Series(["ok", "low_battery", None])).tolist()
    [0.0, 1.0, nan]
    """
    return status.eq(LOW_STATUS).astype(float).where(status.notna())


def sensor_alerts_batch(readings: pd.DataFrame, low_battery: bool = True) -> pd.DataFrame:
    """The vectorised forms over readings (`sensor_id`, `event_id`, `event_time`, `FIELDS`):
    stuck, spike and silence, plus low battery unless `low_battery=False` (then `status` may
    be absent)."""
    if readings.empty:
        return pd.DataFrame()
    temperature = pd.to_numeric(readings["temperature_c"], errors="coerce")
    humidity = pd.to_numeric(readings["humidity_pct"], errors="coerce")
    frame = readings.assign(**{STATE: reading_state(temperature, humidity)})
    alerts = [
        flatline_alerts(frame, STATE, STUCK, speed_col=None, columns=AS_ENTITY),
        step_alerts(frame, "temperature_c", SPIKE, label="spike", columns=AS_ENTITY),
        silence_alerts(frame, SILENT, columns=AS_ENTITY),
    ]
    if low_battery:
        flags = frame.assign(**{LOW: low_battery_flag(frame["status"])})
        alerts.append(
            threshold_alerts(flags, LOW, LOW_BATTERY, label="low_battery", columns=AS_ENTITY)
        )
    found = [a for a in alerts if len(a)]
    return pd.concat(found, ignore_index=True) if found else alerts[0]


class SensorRules(BufferedRules):
    """One sensor's buffered readings and its four rule states (see the module docstring).

    >>> rules = SensorRules("s1")
    >>> for i, t in enumerate([21.0, 21.1, 29.0, 21.2]):
    ...     _ = rules.push(f"e{i}", i * 5_000, [t, 40.0, "ok" if i < 3 else "low_battery", i])
    >>> sorted(a.label for a in rules.release(watermark_ms=15_000))
    ['low_battery', 'spike', 'spike']
    """

    __slots__ = ("states",)

    def __init__(self, sensor_id: str, max_buffered: int = 10_000) -> None:
        super().__init__(max_buffered)
        self.states = (
            FlatlineState(sensor_id, STATE, STUCK, speed_col=None, max_seen=1),
            StepState(sensor_id, "temperature_c", SPIKE, label="spike", max_seen=1),
            ThresholdState(sensor_id, LOW, LOW_BATTERY, label="low_battery", max_seen=1),
            SilenceState(sensor_id, SILENT, max_seen=1),
        )

    def feed(self, event_id: str, event_time: int, payload: Any) -> list[Alert]:
        temperature, humidity, status, seq = payload
        t = np.nan if temperature is None else float(temperature)
        h = np.nan if humidity is None else float(humidity)
        low = np.nan if status is None else float(status == LOW_STATUS)
        event_id, event_time = str(event_id), int(event_time)
        stuck, spike, battery, silence = self.states
        return [
            *stuck.push_numbers(event_id, event_time, [reading_state(t, h)]),
            *spike.push_numbers(event_id, event_time, [t]),
            *battery.push_numbers(event_id, event_time, [low]),
            *silence.update(event_id, event_time, seq),
        ]

    def rules_snapshot(self) -> dict[str, Any]:
        return {"states": [state.snapshot() for state in self.states]}

    def rules_restore(self, data: Mapping[str, Any]) -> None:
        for state, snapshot in zip(self.states, data.get("states") or [], strict=False):
            state.restore(snapshot)


class SensorRulesFactory(RulesFactory):
    """`SensorRules` per sensor, for `pipeline.bucketed_rules`."""

    input_columns = (*KEY_COLUMNS, *FIELDS)

    def __init__(self, ttl_ms: int | None = None, max_buffered: int = 10_000) -> None:
        super().__init__(ttl_ms)
        self.max_buffered = max_buffered

    def new_rules(self, key: str) -> BufferedRules:
        return SensorRules(key, self.max_buffered)

    def payloads(self, frame: pd.DataFrame) -> Iterator[tuple[Any, Any, Any]]:
        for event_id, event_time, *values in input_rows(frame, self.input_columns):
            yield event_id, event_time, [None if v is None or v != v else v for v in values]


__all__ = [
    "LABELS",
    "SILENT",
    "SPIKE",
    "STUCK",
    "SensorRules",
    "SensorRulesFactory",
    "reading_state",
    "sensor_alerts_batch",
]
