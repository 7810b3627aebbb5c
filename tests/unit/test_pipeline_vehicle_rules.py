"""vehicles without Spark: its config section, the per-vehicle rule state behind the
transformWithStateInPandas operator, and the doctests of its modules."""

from __future__ import annotations

import doctest
import importlib
from typing import Any

import pandas as pd
import pytest
from pydantic import ValidationError

from detectors import Alert, frame_to_alerts
from pipeline.config import PipelineConfig
from pipeline.jobs.vehicles.config import (
    DEFAULT_VEHICLE_DETECTORS,
    ThresholdDetector,
    VehiclesSettings,
)
from pipeline.jobs.vehicles.rules import (
    VehicleRules,
    VehicleRulesFactory,
    input_fields,
    params_of,
    vehicle_alerts_batch,
)

MODULES = [
    "pipeline.event_windows",
    "pipeline.jobs.vehicles.parity",
    "pipeline.progress",
    "pipeline.buffered_rules",
    "pipeline.jobs.vehicles.rules",
    "pipeline.jobs.vehicles.windows",
]
T0 = 1_772_524_800_000


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0 and result.attempted > 0


def readings(n: int = 400) -> pd.DataFrame:
    """One vehicle every 2 s: overheating at 200-290 s, stuck oil 400-560 s, a GPS jump at
    300 s, two harsh brakings, speeding 100-190 s; everything else jitters."""
    rows = []
    for i in range(n):
        s = 2 * i
        rows.append(
            {
                "vehicle_id": "veh-1",
                "event_id": f"e{s:05d}",
                "event_time": T0 + s * 1000,
                "speed_kmh": 130.0 if 100 <= s < 190 else 80.0 + 0.3 * (i % 3),
                "speed_limit_kmh": 100.0,
                "coolant_c": 110.0 if 200 <= s < 290 else 90.0 + 0.1 * (i % 3),
                "oil_pressure_kpa": 312.5 if 400 <= s < 560 else 300.0 + i % 5,
                "battery_v": 14.0 + 0.01 * (i % 3),
                "tyre_fl_kpa": 240.0 + 0.1 * (i % 2),
                "tyre_fr_kpa": 241.0 + 0.1 * (i % 2),
                "tyre_rl_kpa": 239.0 + 0.1 * (i % 2),
                "tyre_rr_kpa": 238.0 + 0.1 * (i % 2),
                "accel_long_ms2": -7.5 if s in (612, 648) else 0.05 * ((i % 3) - 1),
                "lat": 48.0 + 0.0004 * i + (0.18 if s == 300 else 0.0),
                "lon": 9.0,
            }
        )
    return pd.DataFrame(rows)


def stream(rules: VehicleRules, frame: pd.DataFrame, watermark_ms: int | None) -> list[Alert]:
    fields = list(input_fields(VehiclesSettings().enabled_detectors()))
    for row in frame.to_dict("records"):
        rules.push(row["event_id"], row["event_time"], [row[f] for f in fields])
    return rules.release(watermark_ms)


def new_rules() -> VehicleRules:
    detectors = VehiclesSettings().enabled_detectors()
    return VehicleRules("veh-1", detectors, input_fields(detectors))


def ids(alerts: list[Alert]) -> list[str]:
    return sorted(a.alert_id for a in alerts)


def test_rules_give_the_vectorised_forms_alerts_whatever_the_arrival_order() -> None:
    frame = readings()
    expected = frame_to_alerts(vehicle_alerts_batch(frame, VehiclesSettings().enabled_detectors()))
    assert {a.rule for a in expected} == {
        "threshold",
        "flatline",
        "gps_jump",
        "harsh_braking",
        "speeding",
    }
    shuffled = frame.sample(frac=1.0, random_state=3)
    with_duplicates = pd.concat([shuffled, shuffled.iloc[:40]])
    assert ids(stream(new_rules(), with_duplicates, None)) == ids(expected)


def test_the_processor_reads_spark_shaped_frames_into_the_same_alerts() -> None:
    detectors = VehiclesSettings().enabled_detectors()
    processor = VehicleRulesFactory(detectors)
    frame = readings()
    frame["speed_limit_kmh"] = 100  # an integer column
    frame.loc[5, "coolant_c"] = float("nan")  # a missing value
    # a key's frame as transformWithStateInPandas builds it: from the key's row tuples
    rows = pd.DataFrame(list(frame.sample(frac=1.0, random_state=2).itertuples(index=False)))
    payloads = list(processor.payloads(rows))
    coolant = processor.fields.index("coolant_c")
    by_id = {event_id: payload for event_id, _, payload in payloads}
    assert by_id["e00010"][coolant] is None
    assert all(isinstance(v, float) for v in by_id["e00000"])
    assert all(isinstance(t, int) for _, t, _ in payloads)
    rules = processor.new_rules("veh-1")
    for event_id, event_time, payload in payloads:
        rules.push(event_id, event_time, payload)
    expected = frame_to_alerts(vehicle_alerts_batch(frame, detectors))
    assert ids(rules.release(None)) == ids(expected)


def test_a_snapshot_mid_stream_and_watermark_steps_give_the_same_alerts() -> None:
    frame = readings()
    whole = stream(new_rules(), frame, None)
    rules = new_rules()
    got: list[Alert] = []
    chunks = [frame.iloc[i : i + 37] for i in range(0, len(frame), 37)]
    for chunk in chunks:
        got += stream(rules, chunk.sample(frac=1.0, random_state=1), int(chunk["event_time"].min()))
        restored = new_rules()
        restored.load_json(rules.to_json())
        rules = restored
    got += rules.release(None)
    assert ids(got) == ids(whole)
    assert rules.buffered == 0


def test_the_binary_state_restores_what_the_json_one_does() -> None:
    frame = readings()
    whole = stream(new_rules(), frame, None)
    rules = new_rules()
    got: list[Alert] = []
    for i in range(0, len(frame), 37):
        chunk = frame.iloc[i : i + 37]
        got += stream(rules, chunk.sample(frac=1.0, random_state=1), int(chunk["event_time"].min()))
        restored = new_rules()
        restored.load_bytes(rules.to_bytes())
        assert restored.to_json() == rules.to_json()
        rules = restored
    got += rules.release(None)
    assert ids(got) == ids(whole)


def test_readings_behind_what_was_released_are_refused() -> None:
    rules = new_rules()
    frame = readings(20)
    stream(rules, frame, T0 + 20_000)
    fields = input_fields(VehiclesSettings().enabled_detectors())
    assert not rules.push("old", T0 + 5_000, [None] * len(fields))
    assert rules.push("new", T0 + 30_000, [None] * len(fields))


def test_a_quiet_vehicle_asks_for_a_timer_at_its_earliest_buffered_reading() -> None:
    rules = new_rules()
    stream(rules, readings(10).iloc[::-1], T0 - 1)
    assert rules.next_timer(ttl_ms=None) == T0
    rules.release(T0 + 9_000)
    assert rules.next_timer(ttl_ms=None) == T0 + 10_000
    rules.release(T0 + 20_000)
    assert rules.next_timer(ttl_ms=3_600_000) == T0 + 18_000 + 3_600_000
    assert rules.expired(T0 + 18_000 + 3_600_000, ttl_ms=3_600_000)


def test_config_defaults_are_the_documented_proposal() -> None:
    settings = VehiclesSettings()
    enabled = settings.enabled_detectors()
    assert list(enabled) == [n for n, d in DEFAULT_VEHICLE_DETECTORS.items() if d.get("enabled", 1)]
    assert "battery_zscore" in settings.detectors and "battery_zscore" not in enabled
    assert params_of(enabled["overheating"]).model_dump() == {
        "above": 105.0,
        "below": None,
        "min_count": 1,
        "min_duration_s": 60.0,
        "max_gap_s": 60.0,
    }
    assert enabled["tyre_leak"].signals == [  # type: ignore[union-attr]
        "tyre_fl_kpa",
        "tyre_fr_kpa",
        "tyre_rl_kpa",
        "tyre_rr_kpa",
    ]


def pipeline(**vehicle: Any) -> PipelineConfig:
    return PipelineConfig.model_validate(
        {
            "job": "vehicles",
            "input_topics": ["vehicles.telemetry"],
            "output_topic": "alerts",
            "vehicles": vehicle,
        }
    )


def test_detector_entries_merge_onto_the_defaults_by_name() -> None:
    settings = pipeline(
        detectors={
            "overheating": {"above": 110},
            "battery_failure": {"signal": "battery_v", "below": 11.8},
            "coolant_trend": {"rule": "trend", "signal": "coolant_c", "rising_above": 2.0},
            "speeding": {"enabled": False},
        }
    ).vehicles
    hot = settings.detectors["overheating"]
    assert isinstance(hot, ThresholdDetector)
    assert (hot.above, hot.min_duration_s, hot.label) == (110.0, 60.0, "overheating")
    assert settings.detectors["battery_failure"].below == 11.8  # type: ignore[union-attr]
    assert settings.detectors["coolant_trend"].rule == "trend"
    assert "speeding" not in settings.enabled_detectors()


@pytest.mark.parametrize(
    ("vehicle", "message"),
    [
        ({"detectors": {"overheating": {"abovee": 3}}}, "abovee"),
        ({"detectors": {"x": {"rule": "threshold", "signal": "nope", "above": 1}}}, "nope"),
        ({"detectors": {"x": {"rule": "magic"}}}, "magic"),
        ({"detectors": {"x": {"rule": "threshold", "signal": "coolant_c"}}}, "above, below"),
        ({"percentiles": [0.5, 1.5]}, "percentiles"),
        ({"late": {"mode": "rescore", "watermark": "10 seconds"}}, "longer than"),
    ],
)
def test_bad_settings_name_the_key(vehicle: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        pipeline(**vehicle)


def test_the_section_belongs_to_its_job() -> None:
    with pytest.raises(ValidationError, match="vehicles configures"):
        PipelineConfig.model_validate(
            {
                "job": "cards",
                "input_topics": ["t"],
                "output_topic": "a",
                "vehicles": {},
            }
        )


def tyres(leak_kpa_per_min: float, common_kpa_per_min: float, n: int = 400) -> pd.DataFrame:
    """A truck's four tyres every 2 s: all move together (cooling), the rear right leaks."""
    frame = readings(n)
    minutes = (frame["event_time"] - T0) / 60_000
    for k, tyre in enumerate(("tyre_fl_kpa", "tyre_fr_kpa", "tyre_rl_kpa", "tyre_rr_kpa")):
        frame[tyre] = 800.0 + 10 * k + common_kpa_per_min * minutes + 0.1 * (frame.index % 2)
    frame["tyre_rr_kpa"] += leak_kpa_per_min * minutes
    return frame


def leaks(frame: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The tyre-leak alerts' signals, and whether both forms agree on the alert ids."""
    detectors = VehiclesSettings().enabled_detectors()
    batch = frame_to_alerts(vehicle_alerts_batch(frame, detectors))
    streamed = stream(new_rules(), frame.sample(frac=1.0, random_state=5), None)
    assert ids(streamed) == ids(batch)
    return sorted(str(a.evidence["signal"]) for a in batch if a.label == "tyre_leak"), ids(batch)


def test_tyre_leak_is_one_tyre_against_the_others_not_all_four_cooling() -> None:
    assert leaks(tyres(leak_kpa_per_min=0.0, common_kpa_per_min=-1.5))[0] == []  # cooling
    assert leaks(tyres(leak_kpa_per_min=-1.0, common_kpa_per_min=0.0))[0] == ["tyre_rr_kpa"]
    assert leaks(tyres(leak_kpa_per_min=-1.0, common_kpa_per_min=1.0))[0] == ["tyre_rr_kpa"]
