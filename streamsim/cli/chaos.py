"""`streamsim chaos SCENARIO --fault F`: kill a component mid-run, restart it, count the loss."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from core.config import ConfigError
from streamsim.cli.common import (
    ConfigOpt,
    JsonOpt,
    domain_name,
    emit,
    err_console,
    fail,
    stack_from,
)
from streamsim.cli.simulate import load_scenario, parse_speed

SCENARIO_DIR = Path("config/scenarios")
#: What `recovery_s` measures, per fault (the human line).
RECOVERED = {
    "broker": "writes acknowledged again",
    "broker-of-3": "writes acknowledged again",
    "driver": "the restarted job committed the killed batch",
    "endpoint": "the restarted endpoint was live (state rebuilt)",
    "lake-full": "the held batch reached the lake",
    "slow-broker": "the simulator's last record was acknowledged",
}


def scenario_path(scenario: str) -> Path:
    """A scenario YAML, or a name in config/scenarios/ (`sensors` or `sensors`)."""
    path = Path(scenario)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    named = SCENARIO_DIR / f"{scenario.replace('-', '_')}.yaml"
    if not named.exists():
        known = ", ".join(sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))) or "none"
        raise ConfigError(scenario, [f"no scenario file or name {scenario!r}; known: {known}"])
    return named


def chaos(
    scenario: Annotated[
        str,
        typer.Argument(
            help="Scenario YAML, or a name in config/scenarios/ (sensors).", callback=domain_name
        ),
    ],
    fault: Annotated[
        str,
        typer.Option(
            help="broker: kill -9 the single broker; broker-of-3: kill -9 one of 3 brokers; "
            "driver: kill -9 the cards Spark driver mid-batch (card scenarios); "
            "endpoint: kill -9 the fraud endpoint under load; "
            "lake-full: cards's lake becomes unwritable for --outage-s; "
            "slow-broker: client quotas throttle the broker for --outage-s."
        ),
    ] = "broker",
    events: Annotated[
        int | None,
        typer.Option(
            help="Event records to simulate (endpoint: requests). Default per fault: 20,000 "
            "(broker faults), 12,000 (driver, lake-full), 3,000 (slow-broker), 5,000 (endpoint).",
            min=100,
        ),
    ] = None,
    speed: Annotated[
        str | None,
        typer.Option(
            help="Simulated seconds per wall second, or 'max'. Default: as fast as a rate cap "
            "lets, the cap spreading --events over 30s (broker faults, lake-full), 90s "
            "(driver: the job must commit a batch and start the next while the simulator "
            "sends) or 40s (slow-broker)."
        ),
    ] = None,
    entities: Annotated[
        int | None,
        typer.Option(
            help="Override the scenario's entity count. Default: the scenario's, at most 2,000 "
            "for driver, lake-full and slow-broker (hours of card input pass the jobs' 2-hour "
            "watermark).",
            min=1,
        ),
    ] = None,
    outage_s: Annotated[
        float, typer.Option("--outage-s", help="Seconds the killed process stays down.", min=0)
    ] = 5.0,
    seed: Annotated[int | None, typer.Option(help="Override the scenario's seed.", min=0)] = None,
    keep: Annotated[
        bool, typer.Option(help="Keep the private broker's directory (logs) afterwards.")
    ] = False,
    durability: Annotated[
        str | None,
        typer.Option(
            help="endpoint: the endpoint's durability setting (ack, log, none). Default: the "
            "endpoint's (ack). Under ack and log no answered decision may be lost."
        ),
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Kill a component of the real stack mid-run, restart it, and report what was lost.

    Each fault's defaults finish in a few minutes on 2 cores; the first line says what is
    sent, at what pace, and how long to expect.

    Exit status 1 when anything was lost or duplicated beyond truth (driver: an alert of the
    uninterrupted run missing or written twice; endpoint: an acknowledged decision missing
    from cards.activity (under --durability none: beyond the publish linger's window), or a
    replay answered differently),
    or a check of the run failed. Exit status 3 when the fault could not be injected mid-run
    (e.g. the simulator finished first) or left nothing to compare: nothing lost, nothing
    proven.
    """
    from streamsim.chaos import BROKER_FAULTS, FAULTS, run_broker_fault
    from streamsim.chaos.defaults import plan
    from streamsim.chaos.driver import run_driver_fault
    from streamsim.chaos.endpoint import run_endpoint_fault
    from streamsim.chaos.lake import run_lake_fault
    from streamsim.chaos.report import outcome
    from streamsim.chaos.slow import run_slow_broker_fault

    if fault not in FAULTS:
        raise typer.BadParameter(f"{fault!r}: one of {', '.join(FAULTS)}", param_hint="--fault")
    run = plan(fault, events, parse_speed(speed), entities)
    loaded = load_scenario(scenario_path(scenario))
    scenario_config = run.apply(loaded)
    stack = stack_from(config)
    err_console.print(run.describe(loaded.name, loaded.entities), highlight=False)
    common: dict[str, Any] = {"outage_s": outage_s, "seed": seed, "keep": keep}
    if fault in BROKER_FAULTS:
        report = run_broker_fault(
            scenario_config, fault, stack, events=run.events, speed=run.speed, **common
        )
    elif fault in ("driver", "lake-full", "slow-broker"):
        run_scenario_fault = {
            "driver": run_driver_fault,
            "lake-full": run_lake_fault,
            "slow-broker": run_slow_broker_fault,
        }[fault]
        report = run_scenario_fault(
            scenario_config, stack, events=run.events, speed=run.speed, **common
        )
    else:
        if durability is not None:
            common["durability"] = durability
        report = run_endpoint_fault(scenario_config, stack, events=run.events, **common)
    verdict = "[green]ok[/]" if report.ok else "[red]FAILED[/]"
    human = "\n".join(
        [
            f"{verdict}: {report.fault} fault on {report.scenario}: {report.sent:,} events sent, "
            f"{report.lost:,} lost, {report.unexpected_duplicates:,} unexpected duplicates, "
            f"{report.duplicate_alert_ids:,} duplicate alert ids; "
            f"{RECOVERED[report.fault]} {report.recovery_s:.1f}s after the kill",
            *(f"  {note}" for note in report.notes),
        ]
    )
    if as_json and report.notes:  # stdout's last line is the JSON; the detail goes to stderr
        err_console.print("\n".join(report.notes), highlight=False)
    emit(report.to_json(), as_json, human)
    code, error = outcome(report)
    if error is not None:
        raise fail(error, code)
