"""Connected vehicles (`domain.type: connected_vehicles`): a fleet driving trips between real
cities, sending telemetry. The scenario is `scenario.ConnectedVehicles`; its knobs are in
`config`."""
