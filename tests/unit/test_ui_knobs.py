"""Scenario knobs: which sliders a scenario gets, and that what they send validates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from runs.overrides import apply_overrides, validate_scenario
from runs.tunable import TunableKeys
from scenarios.catalog import ScenarioConfig
from tests.conftest import REPO_ROOT
from ui.knobs import NO_CAP, Knob, knobs_for, run_request, spread_of

SCENARIOS = REPO_ROOT / "config" / "scenarios"
SENSORS_YAML = SCENARIOS / "sensors.yaml"


def raw() -> dict[str, Any]:
    return dict(yaml.safe_load(SENSORS_YAML.read_text()))


def resolved() -> dict[str, Any]:
    return ScenarioConfig.model_validate(raw()).model_dump(mode="json")


def knobs_of(config: dict[str, Any]) -> list[Knob]:
    """The knobs the panel shows: of the keys the API lists as tunable for the scenario."""
    return knobs_for(config, TunableKeys.of(config).dotted())


def test_the_sensors_gets_rate_mix_skew_and_lateness_knobs() -> None:
    knobs = {k.key: k for k in knobs_of(resolved())}
    assert {"entities", "speed", "max_rate", "duration_s"} <= set(knobs)
    assert knobs["entities"].default == 20000 and 20000 in knobs["entities"].options
    assert knobs["speed"].default == 1.0 and "max" in knobs["speed"].options
    assert knobs["max_rate"].default == NO_CAP
    # The fault mix: the rate and each weight, read from the file.
    assert knobs["domain.faults.rate_per_hour"].default == 0.05
    assert knobs["domain.faults.mix.stuck_sensor"].default == 0.4
    assert knobs["domain.faults.mix.spike"].default == 0.3
    assert knobs["domain.faults.mix.silent_device"].default == 0.3
    assert knobs["domain.faults.mix.spike"].group == "mix"
    # Skew and lateness, from the top-level clock and delivery.
    assert knobs["clock.offset_s"].default == 0.5 and knobs["clock.offset_s"].group == "skew"
    assert knobs["delivery.delay_s"].default == 0.08
    assert knobs["delivery.duplicates.probability"].default == 0.005
    assert knobs["delivery.outages.rate_per_hour"].default == 0.5
    # Distributions and the domain's tag are not knobs.
    assert not any(k.startswith("domain.interval_s") or k == "domain.type" for k in knobs)


def test_untouched_sliders_send_nothing() -> None:
    config = resolved()
    knobs = knobs_of(config)
    request = run_request(config, knobs, {k.key: k.default for k in knobs})
    assert (request.speed, request.duration_s, request.overrides) == (None, None, {})


def test_moved_sliders_become_overrides_that_validate() -> None:
    config = resolved()
    knobs = knobs_of(config)
    values = {k.key: k.default for k in knobs}
    values.update(
        {
            "entities": 500,
            "speed": "max",
            "duration_s": 60,
            "max_rate": 1000,
            "domain.faults.mix.spike": 0.9,
            "clock.offset_s": 5.0,
            "delivery.delay_s": 2.0,
            "delivery.drops.probability": 0.05,
        }
    )
    request = run_request(config, knobs, values)
    assert request.speed == "max" and request.duration_s == 60.0
    over = request.overrides
    assert over["entities"] == 500 and over["pacing"] == {"max_rate": 1000.0}
    assert over["domain"] == {"faults": {"mix": {"spike": 0.9}}}
    assert over["clock"] == {"offset_s": {"type": "normal", "mean": 0.0, "std": 5.0}}
    # Clock and delivery reach every class: a class's own keys would win over the top level.
    assert set(over["classes"]) == {"smart_meter", "env_sensor", "legacy_logger"}
    env = over["classes"]["env_sensor"]["delivery"]
    assert env["delay_s"] == {"type": "lognormal", "median": 2.0, "sigma": 0.8}  # its own sigma
    assert env["drops"] == {"probability": 0.05}
    # What the API does with them: merged over the file, validated.
    merged = apply_overrides(raw(), over)
    scenario = validate_scenario(merged, over)
    by_name = {c.name: c for c in scenario.classes}
    assert all(c.delivery.drops.probability == 0.05 for c in scenario.classes)
    assert by_name["legacy_logger"].clock.offset_s.std == 5.0  # type: ignore[union-attr]
    assert scenario.domain.faults.mix == {"stuck_sensor": 0.4, "spike": 0.9, "silent_device": 0.3}
    assert scenario.entities == 500 and scenario.pacing.max_rate == 1000.0


def test_a_fraud_domain_gets_its_rates_and_delivery_mode() -> None:
    config = resolved()
    config["domain"] = {
        "type": "cards",
        "delivery": "kafka",
        "fraud": {
            "impossible_travel": {"rate_per_1k_card_hours": 0.5, "uses": {"type": "uniform"}},
            "card_testing": {"rate_per_1k_card_hours": 0.2, "online_share": 0.8},
        },
        "travel": {"trips_per_day": 0.05},
    }
    knobs = {k.key: k for k in knobs_of(config)}
    rates = knobs["domain.fraud.impossible_travel.rate_per_1k_card_hours"]
    assert rates.default == 0.5 and rates.high == 5.0 and rates.group == "mix"
    assert "domain.fraud.card_testing.rate_per_1k_card_hours" in knobs
    assert knobs["domain.delivery"].options == ["kafka", "http"]
    assert "domain.travel.trips_per_day" not in knobs  # not a rate knob
    values = {k: v.default for k, v in knobs.items()}
    values["domain.fraud.card_testing.rate_per_1k_card_hours"] = 2.0
    values["domain.delivery"] = "http"
    request = run_request(config, list(knobs.values()), values)
    assert request.overrides == {
        "domain": {
            "delivery": "http",
            "fraud": {"card_testing": {"rate_per_1k_card_hours": 2.0}},
        }
    }


def test_spread_of_distributions() -> None:
    assert spread_of({"type": "normal", "mean": 3, "std": 2}) == 2
    assert round(spread_of({"type": "uniform", "low": -30, "high": 30}), 3) == 17.321
    assert spread_of({"type": "constant", "value": 4}) == 0
    assert spread_of(3.0) == 0


def moved(knob: Knob) -> Any:
    """A value other than the file's, within the knob's range."""
    if knob.kind == "select":
        others = [o for o in knob.options if o != knob.default]
        return others[len(others) // 2]
    return (knob.low + knob.high) / 2 if knob.default != (knob.low + knob.high) / 2 else knob.high


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_knob_of_every_scenario_file_sends_a_valid_override(path: Path) -> None:
    data = yaml.safe_load(path.read_text())
    try:
        config = ScenarioConfig.model_validate(data).model_dump(mode="json")
    except ValidationError as e:  # a shipped file users cannot load is a failure, not a skip
        pytest.fail(f"{path.name} does not validate:\n{e}")
    knobs = knobs_of(config)
    values = {k.key: moved(k) for k in knobs}
    request = run_request(config, knobs, values)
    assert request.speed is not None and request.duration_s is not None
    validate_scenario(apply_overrides(data, request.overrides), request.overrides)
