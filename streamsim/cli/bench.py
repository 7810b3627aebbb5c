"""`streamsim bench simulator | pipeline | api`: a subject against a reference, same run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from streamsim.cli.common import ConfigOpt, JsonOpt, emit, stack_from
from streamsim.kafka.broker import LocalBroker

app = typer.Typer(
    help="Benchmarks: each reports a ratio against a reference measured in the same run."
)


@app.command()
def simulator(
    scenario: Annotated[Path, typer.Option(help="Scenario YAML.")] = Path(
        "config/scenarios/sensor_fleet.yaml"
    ),
    events: Annotated[int, typer.Option(min=1000, help="Events per run.")] = 1_000_000,
    rounds: Annotated[int, typer.Option(min=1, help="Runs of each; medians are reported.")] = 1,
    entities: Annotated[
        int | None, typer.Option(help="Override the scenario's entity count.")
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Simulator -> Kafka vs Kafka's ProducerPerformance with the same records and settings."""
    from streamsim.bench.simulator import bench_simulator

    stack = stack_from(config)
    started = not stack.kafka.external and not LocalBroker(stack).status().running
    if started:
        LocalBroker(stack).up()
    try:
        report = bench_simulator(stack, scenario, events, rounds, entities)
    finally:
        if started:
            LocalBroker(stack).down()
    r = report.to_dict()
    emit(
        r,
        as_json,
        f"simulator: {r['events_per_s']:,.0f} events/s; ProducerPerformance: "
        f"{r['reference_rate']:,.0f} records/s; ratio {r['ratio']:.2f} "
        f"(with truth: {r['records_per_s']:,.0f} records/s, ratio {r['records_ratio']:.2f}); "
        f"peak RSS {r['peak_rss_mb']:,.0f} MB "
        f"({r['record_bytes']:.0f}-byte records, {events:,} events)",
    )
