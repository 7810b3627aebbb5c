"""The sensor fleet (`domain.type: sensors`): smart meters and environmental sensors
reporting readings. The scenario is `scenario.SensorsScenario`; its knobs are in `config`."""
