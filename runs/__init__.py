"""Running things: the scenario runs the panel starts (`manager`: the simulator, the job and
the endpoint as child processes, planned by `components`), their evaluations (`evaluations`),
the panel's load tests (`loadtests`), and the allow-list of what a run may tune (`tunable`).
Imported by `api/` (the HTTP routes) and `streamsim/` (the shell); it imports neither."""
