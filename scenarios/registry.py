"""Which class implements each `domain.type`; imported lazily so a config loads fast."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.config import StackConfig
    from scenarios.config import ScenarioConfig
    from simulators.scenario import Scenario

SCENARIOS: dict[str, str] = {
    "sensor_fleet": "scenarios.sensor_fleet:SensorFleet",
    "card_velocity": "scenarios.card_velocity:CardVelocity",
    "connected_vehicles": "scenarios.vehicles:ConnectedVehicles",
}


def build_scenario(config: ScenarioConfig, stack: StackConfig | None = None) -> Scenario:
    """The scenario of `config.domain.type`; `stack` reaches scenarios that take one (e.g. for
    the card token secret); None: the built-in stack defaults."""
    module, _, name = SCENARIOS[config.domain.type].partition(":")
    factory = getattr(importlib.import_module(module), name)
    scenario: Scenario = (
        factory(config, stack=stack) if getattr(factory, "uses_stack", False) else factory(config)
    )
    return scenario
