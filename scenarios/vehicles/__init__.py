"""Connected vehicles (`domain.type: vehicles`): a fleet driving trips between real
cities, sending telemetry. The scenario is `scenario.VehiclesScenario`; its knobs are in
`config`."""
