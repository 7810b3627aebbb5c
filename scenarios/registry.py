"""Which class implements each `domain.type`; imported lazily so a config loads fast."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scenarios.config import ScenarioConfig
    from simulators.scenario import Scenario

SCENARIOS: dict[str, str] = {
    "sensor_fleet": "scenarios.sensor_fleet:SensorFleet",
}


def build_scenario(config: ScenarioConfig) -> Scenario:
    module, _, name = SCENARIOS[config.domain.type].partition(":")
    scenario: Scenario = getattr(importlib.import_module(module), name)(config)
    return scenario
