"""Per-vehicle series rules from `detectors/`, in event-time order, for `vehicles`.

Each configured detector (`pipeline.jobs.vehicles.config.VehicleDetector`) becomes one
rule state per signal: `ThresholdState`, `TrendState`, `FlatlineState`, `ZScoreState`,
`BrakingState`, `SpeedingState` (the series rules, fed with `SeriesState.push`) or `GpsJumpState`.
A vehicle's readings wait in one shared `EventTimeBuffer`
(`pipeline.buffered_rules.BufferedRules`) and are fed to every state once the watermark passes
them, in (event_time, event_id) order; the states keep no buffer and no id memory of their own
(duplicates are dropped before, by Spark's `dropDuplicatesWithinWatermark`, and by the buffer's
order: equal ids come out side by side). Alerts and their ids are the detectors' own, so the
vectorised forms over the same readings (`vehicle_alerts_batch`) give the same alerts: the batch
oracle of the tests.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pandas as pd

from detectors import (
    Alert,
    BrakingParams,
    BrakingState,
    FlatlineParams,
    FlatlineState,
    GpsJumpParams,
    GpsJumpState,
    SeriesState,
    SpeedingParams,
    SpeedingState,
    ThresholdParams,
    ThresholdState,
    TrendParams,
    TrendState,
    ZScoreParams,
    ZScoreState,
    braking_alerts,
    flatline_alerts,
    gps_jump_alerts,
    speeding_alerts,
    threshold_alerts,
    trend_alerts,
    zscore_alerts,
)
from detectors.params import Thresholds
from detectors.series.trend import minus_mean, versus_others
from pipeline.buffered_rules import BufferedRules, RulesFactory, input_rows
from pipeline.jobs.vehicles.config import (
    BrakingDetector,
    FlatlineDetector,
    GpsJumpDetector,
    SeriesSignals,
    SpeedingDetector,
    ThresholdDetector,
    TrendDetector,
    VehicleDetector,
    ZScoreDetector,
)

KEY_COLUMNS = ("event_id", "event_time")
NAN = float("nan")
GPS_FIELDS = ("lat", "lon")

RuleState = SeriesState | GpsJumpState


def params_of(spec: VehicleDetector) -> Any:
    """The detector's own thresholds model, from a config entry (label, signals left out).

    >>> from pipeline.jobs.vehicles.config import ThresholdDetector
    >>> params_of(ThresholdDetector(signals=["coolant_c"], above=105, label="overheating"))
    ThresholdParams(above=105.0, below=None, min_count=1, min_duration_s=0.0, max_gap_s=60.0)
    """
    models: dict[type, type[Thresholds]] = {
        ThresholdDetector: ThresholdParams,
        TrendDetector: TrendParams,
        FlatlineDetector: FlatlineParams,
        ZScoreDetector: ZScoreParams,
        GpsJumpDetector: GpsJumpParams,
        BrakingDetector: BrakingParams,
        SpeedingDetector: SpeedingParams,
    }
    model = models[type(spec)]
    return model.model_validate(spec.model_dump(include=set(model.model_fields)))


def rule_states(
    vehicle_id: str,
    detectors: Mapping[str, VehicleDetector],
    params: Sequence[Any] | None = None,
) -> list[RuleState]:
    """One state per detector and signal, in config order; `params`: `params_of` of each
    detector, when the caller has them (validating them costs more than the states)."""
    states: list[RuleState] = []
    for spec, p in zip(
        detectors.values(), params or map(params_of, detectors.values()), strict=True
    ):
        label = spec.label
        if isinstance(spec, ThresholdDetector):
            states += [
                ThresholdState(vehicle_id, s, p, label=label, max_seen=1) for s in spec.signals
            ]
        elif isinstance(spec, TrendDetector):
            states += [TrendState(vehicle_id, s, p, label=label, max_seen=1) for s in spec.signals]
        elif isinstance(spec, FlatlineDetector):
            states += [
                FlatlineState(
                    vehicle_id, s, p, speed_col=spec.speed_signal, label=label, max_seen=1
                )
                for s in spec.signals
            ]
        elif isinstance(spec, ZScoreDetector):
            states += [ZScoreState(vehicle_id, s, p, label=label, max_seen=1) for s in spec.signals]
        elif isinstance(spec, BrakingDetector):
            states.append(BrakingState(vehicle_id, p, signal=spec.signal, label=label, max_seen=1))
        elif isinstance(spec, SpeedingDetector):
            states.append(SpeedingState(vehicle_id, p, signal=spec.signal, label=label, max_seen=1))
        elif isinstance(spec, GpsJumpDetector):
            states.append(GpsJumpState(vehicle_id, p, label=label, max_seen=1))
    return states


def state_fields(state: RuleState) -> tuple[str, ...]:
    return GPS_FIELDS if isinstance(state, GpsJumpState) else state.fields()


def others_of(detectors: Mapping[str, VehicleDetector]) -> list[tuple[str, ...]]:
    """Per rule state (in `rule_states` order), the signals whose mean it is taken against
    (`TrendDetector.versus_others`), else ()."""
    out: list[tuple[str, ...]] = []
    for spec in detectors.values():
        count = len(spec.signals) if isinstance(spec, SeriesSignals) else 1
        if isinstance(spec, TrendDetector) and spec.versus_others:
            out += [tuple(o for o in spec.signals if o != s) for s in spec.signals]
        else:
            out += [()] * count
    return out


def input_fields(detectors: Mapping[str, VehicleDetector]) -> tuple[str, ...]:
    """The reading fields the detectors read, in a fixed order (the payload of a reading).

    >>> from pipeline.jobs.vehicles.config import VehiclesSettings
    >>> input_fields(VehiclesSettings().enabled_detectors())[:4]
    ('coolant_c', 'tyre_fl_kpa', 'tyre_fr_kpa', 'tyre_rl_kpa')
    """
    fields: dict[str, None] = {}
    for state, others in zip(rule_states("-", detectors), others_of(detectors), strict=True):
        fields.update(dict.fromkeys((*state_fields(state), *others)))
    return tuple(fields)


class VehicleRules(BufferedRules):
    """One vehicle's buffered readings and rule states (see the module docstring).

    >>> from pipeline.jobs.vehicles.config import ThresholdDetector
    >>> hot = {"hot": ThresholdDetector(signals=["coolant_c"], above=105, min_count=2,
    ...     label="overheating")}
    >>> rules = VehicleRules("veh-1", hot, input_fields(hot))
    >>> for event_id, second, coolant in [("b", 2, 107.0), ("a", 1, 106.0), ("c", 3, 90.0)]:
    ...     _ = rules.push(event_id, second * 1000, [coolant])
    >>> [(a.rule, a.label, a.event_ids) for a in rules.release(watermark_ms=3_000)]
    [('threshold', 'overheating', ('a', 'b'))]
    """

    __slots__ = ("slots", "states")

    def __init__(
        self,
        vehicle_id: str,
        detectors: Mapping[str, VehicleDetector],
        fields: Sequence[str],
        max_buffered: int = 100_000,
        params: Sequence[Any] | None = None,
    ) -> None:
        super().__init__(max_buffered)
        self.states = rule_states(vehicle_id, detectors, params)
        position = {name: i for i, name in enumerate(fields)}
        self.slots = [
            (
                state,
                [position[f] for f in state_fields(state)],
                [position[f] for f in others],
                isinstance(state, GpsJumpState),
            )
            for state, others in zip(self.states, others_of(detectors), strict=True)
        ]

    def feed(self, event_id: str, event_time: int, payload: Any) -> list[Alert]:
        # The payload's values as floats once per reading (NaN where missing), not per state.
        numbers = [NAN if v is None else v for v in payload]
        event_id, event_time = str(event_id), int(event_time)
        alerts: list[Alert] = []
        for state, where, others, gps in self.slots:
            if gps:
                assert isinstance(state, GpsJumpState)
                lat, lon = (payload[i] for i in where)
                alerts.extend(state.update(event_id, event_time, lat, lon, True))
                continue
            assert isinstance(state, SeriesState)
            values = [numbers[i] for i in where]
            if others:  # on floats, NaN propagates where minus_mean gives None
                values[0] = minus_mean(values[0], [numbers[i] for i in others])
            alerts.extend(state.push_numbers(event_id, event_time, values))
        return alerts

    def rules_snapshot(self) -> dict[str, Any]:
        return {"states": [state.snapshot() for state in self.states]}

    def rules_restore(self, data: Mapping[str, Any]) -> None:
        for state, snapshot in zip(self.states, data.get("states") or [], strict=False):
            state.restore(snapshot)

    def rules_columns_snapshot(self) -> dict[str, Any]:
        """Trend windows as columns; siblings' equal time and id columns are one object, so
        pickle stores them once (the four tyres' windows hold the same readings)."""
        shared: dict[Any, Any] = {}
        states: list[dict[str, Any]] = []
        for state in self.states:
            if not isinstance(state, TrendState):
                states.append(state.snapshot())
                continue
            data = state.columns_snapshot()
            times, values, ids = data["columns"]
            times = shared.setdefault(times.tobytes(), times)
            if isinstance(ids, str):
                ids = shared.setdefault(ids, ids)
            data["columns"] = (times, values, ids)
            states.append(data)
        return {"states": states}

    def rules_columns_restore(self, data: Mapping[str, Any]) -> None:
        for state, snapshot in zip(self.states, data.get("states") or [], strict=False):
            if "columns" in snapshot and isinstance(state, TrendState):
                state.columns_restore(snapshot)
            else:
                state.restore(snapshot)


class VehicleRulesFactory(RulesFactory):
    """`VehicleRules` per vehicle, for `pipeline.bucketed_rules`."""

    def __init__(
        self,
        detectors: Mapping[str, VehicleDetector],
        ttl_ms: int | None = None,
        max_buffered: int = 100_000,
    ) -> None:
        super().__init__(ttl_ms)
        self.detectors = dict(detectors)
        self.params = [params_of(spec) for spec in self.detectors.values()]
        self.fields = input_fields(self.detectors)
        self.input_columns = (*KEY_COLUMNS, *self.fields)
        self.max_buffered = max_buffered

    def new_rules(self, key: str) -> BufferedRules:
        return VehicleRules(key, self.detectors, self.fields, self.max_buffered, self.params)

    def payloads(self, frame: pd.DataFrame) -> Iterator[tuple[Any, Any, Any]]:
        for event_id, event_time, *row in input_rows(frame, self.input_columns):
            yield event_id, event_time, [None if v is None or v != v else float(v) for v in row]


def vehicle_alerts_batch(
    readings: pd.DataFrame, detectors: Mapping[str, VehicleDetector]
) -> pd.DataFrame:
    """The vectorised forms of the same detectors over readings with `vehicle_id` (an oracle)."""
    frame = readings.rename(columns={"vehicle_id": "entity_id"})
    alerts: list[pd.DataFrame] = []
    for spec in detectors.values():
        p, label = params_of(spec), spec.label
        if isinstance(spec, ThresholdDetector):
            alerts += [threshold_alerts(frame, s, p, label=label) for s in spec.signals]
        elif isinstance(spec, TrendDetector):
            rows = versus_others(frame, spec.signals) if spec.versus_others else frame
            alerts += [trend_alerts(rows, s, p, label=label) for s in spec.signals]
        elif isinstance(spec, FlatlineDetector):
            alerts += [
                flatline_alerts(frame, s, p, speed_col=spec.speed_signal, label=label)
                for s in spec.signals
            ]
        elif isinstance(spec, ZScoreDetector):
            alerts += [zscore_alerts(frame, s, p, label=label) for s in spec.signals]
        elif isinstance(spec, BrakingDetector):
            alerts.append(braking_alerts(frame, p, signal=spec.signal, label=label))
        elif isinstance(spec, SpeedingDetector):
            alerts.append(speeding_alerts(frame, p, signal=spec.signal, label=label))
        elif isinstance(spec, GpsJumpDetector):
            alerts.append(gps_jump_alerts(frame, p, label=label))
    found = [a for a in alerts if len(a)]
    if not found:
        return alerts[0] if alerts else pd.DataFrame()
    return pd.concat(found, ignore_index=True)


__all__ = [
    "VehicleRules",
    "VehicleRulesFactory",
    "input_fields",
    "params_of",
    "rule_states",
    "vehicle_alerts_batch",
]
