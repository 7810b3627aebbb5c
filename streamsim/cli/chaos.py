"""`streamsim chaos SCENARIO --fault F`: kill a component mid-run, restart it, count the loss."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

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
        int, typer.Option(help="Event records to simulate (endpoint: requests).", min=100)
    ] = 20_000,
    speed: Annotated[
        str | None,
        typer.Option(
            help="Simulated seconds per wall second, or 'max'. Default: 1 (broker faults), "
            "300 (driver, lake-full: the job must see several batches while the simulator "
            "produces)."
        ),
    ] = None,
    entities: Annotated[
        int | None, typer.Option(help="Override the scenario's entity count.", min=1)
    ] = None,
    outage_s: Annotated[
        float, typer.Option("--outage-s", help="Seconds the killed process stays down.", min=0)
    ] = 5.0,
    seed: Annotated[int | None, typer.Option(help="Override the scenario's seed.", min=0)] = None,
    keep: Annotated[
        bool, typer.Option(help="Keep the private broker's directory (logs) afterwards.")
    ] = False,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Kill a component of the real stack mid-run, restart it, and report what was lost.

    Exit status 1 when anything was lost or duplicated beyond truth (driver: an alert of the
    uninterrupted run missing or written twice; endpoint: an acknowledged decision missing
    from cards.activity beyond the publish linger's window, or a replay answered differently).
    """
    from streamsim.chaos import BROKER_FAULTS, FAULTS, run_broker_fault
    from streamsim.chaos.driver import run_driver_fault
    from streamsim.chaos.endpoint import run_endpoint_fault
    from streamsim.chaos.lake import run_lake_fault
    from streamsim.chaos.slow import run_slow_broker_fault

    if fault not in FAULTS:
        raise typer.BadParameter(f"{fault!r}: one of {', '.join(FAULTS)}", param_hint="--fault")
    scenario_config = load_scenario(scenario_path(scenario)).with_overrides(entities=entities)
    stack = stack_from(config)
    rate = None if speed is None else parse_speed(speed)
    if fault in BROKER_FAULTS:
        report = run_broker_fault(
            scenario_config,
            fault,
            stack,
            events=events,
            speed=1.0 if rate is None else rate,
            outage_s=outage_s,
            seed=seed,
            keep=keep,
        )
    elif fault in ("driver", "lake-full"):
        run_job_fault = run_driver_fault if fault == "driver" else run_lake_fault
        report = run_job_fault(
            scenario_config,
            stack,
            events=events,
            speed=300.0 if rate is None else rate,
            outage_s=outage_s,
            seed=seed,
            keep=keep,
        )
    else:
        run_client_fault = run_endpoint_fault if fault == "endpoint" else run_slow_broker_fault
        report = run_client_fault(
            scenario_config, stack, events=events, outage_s=outage_s, seed=seed, keep=keep
        )
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
    if not report.ok:
        raise fail("the fault lost or duplicated records (see above)", 1)
