"""Running things: the scenario runs the panel starts (`manager`, a run's record in `run`,
its components planned by `components`, its overrides in `overrides` within the allow-list of
`tunable`), their evaluations (`evaluations`) and the panel's load tests (`loadtests`); and
what every child process of the project shares: its command line (`commands`), its process
group (`process`), its health check (`health`) and its logs (`logs`). Imported by `api/` (the
HTTP routes) and `streamsim/` (the shell); it imports neither."""
