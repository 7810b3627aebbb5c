"""The vehicles domain section: the example file, defaults, and errors naming keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.config import ConfigError
from core.config.loader import validate
from scenarios.catalog import ScenarioConfig
from scenarios.vehicles.config import VEHICLE_FAULTS, VehiclesDomain
from streamsim.config.kinds import load_file

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "config" / "scenarios" / "vehicles.yaml"


def errors_for(domain: dict[str, Any], **top: Any) -> str:
    with pytest.raises(ConfigError) as info:
        validate(ScenarioConfig, {**top, "domain": {"type": "vehicles", **domain}}, "s.yaml")
    return str(info.value)


def test_the_example_file_is_valid() -> None:
    kind, cfg = load_file(EXAMPLE)
    assert kind == "scenario" and isinstance(cfg, ScenarioConfig)
    d = cfg.domain
    assert isinstance(d, VehiclesDomain)
    assert cfg.name == "vehicles" and cfg.entities == 2000
    assert d.topic == "vehicles.telemetry" and d.interval_s == 1.0
    assert set(d.vehicle_types) == {"van", "truck"} <= {c.name for c in cfg.classes}
    assert set(d.faults.rate_per_hour) == set(VEHICLE_FAULTS)
    truck = next(c for c in cfg.classes if c.name == "truck")
    assert truck.delivery.outages.flush == "shuffled"
    assert truck.delivery.outages.buffer_cap == 3600  # inherited from the top level


def test_defaults_name_the_truth_topic_after_the_domain() -> None:
    cfg = ScenarioConfig.model_validate({"domain": {"type": "vehicles"}})
    assert cfg.name == "vehicles"
    d = cfg.domain
    assert isinstance(d, VehiclesDomain)
    assert d.region.countries == ["DE"] and d.trips.min_km == 20 and d.trips.max_km == 400
    assert all(d.faults.rate_per_hour[k] > 0 for k in VEHICLE_FAULTS)


@pytest.mark.parametrize(
    ("domain", "top", "message"),
    [
        ({"trips": {"min_km": 50, "max_km": 10}}, {}, "domain.trips"),
        ({"region": {"bbox": [50, 10, 40, 12]}}, {}, "domain.region.bbox"),
        ({"faults": {"rate_per_hour": {"overheating": -1}}}, {}, "domain.faults"),
        ({"faults": {"rate_per_hour": {"melting": 1}}}, {}, "domain.faults.rate_per_hour.melting"),
        ({"faults": {"stuck_sensor": {"signals": ["rpm"]}}}, {}, "domain.faults.stuck_sensor"),
        ({"roads": {"urban": {"speed_limits_kmh": [50], "limit_weights": [1, 2]}}}, {}, "urban"),
        ({"vehicle_types": {"bus": {}}}, {"classes": [{"name": "car"}]}, "vehicle_types"),
        ({"interval_s": 0}, {}, "domain.interval_s"),
    ],
)
def test_bad_values_name_their_key(
    domain: dict[str, Any], top: dict[str, Any], message: str
) -> None:
    assert message in errors_for(domain, **top)
