"""The sensor fleet (`domain.type: sensor_fleet`): smart meters and environmental sensors
reporting readings. The scenario is `scenario.SensorFleet`; its knobs are in `config`."""
