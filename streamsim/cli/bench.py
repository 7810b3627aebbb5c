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


@app.command(name="api")
def api_bench(
    connections: Annotated[
        int, typer.Option(min=1, max=1024, help="Keep-alive connections (closed loop).")
    ] = 32,
    duration: Annotated[
        float, typer.Option(min=1, help="Measured seconds per run, after the warm-up.")
    ] = 10.0,
    warmup: Annotated[float, typer.Option(min=0, help="Unmeasured seconds per run.")] = 3.0,
    rounds: Annotated[
        int, typer.Option(min=1, help="Runs of each, alternating; medians are reported.")
    ] = 2,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fraud endpoint vs a bare FastAPI endpoint (same uvicorn settings), saturated."""
    from streamsim.bench.api import bench_api
    from streamsim.cli.common import err_console

    stack = stack_from(config)
    started = not stack.kafka.external and not LocalBroker(stack).status().running
    if started:
        err_console.print("starting the local broker (stopped again afterwards)")
        LocalBroker(stack).up()
    try:
        report = bench_api(
            stack,
            connections=connections,
            warmup_s=warmup,
            duration_s=duration,
            rounds=rounds,
            progress=lambda step: err_console.print(f"bench api: {step}", highlight=False),
        )
    finally:
        if started:
            LocalBroker(stack).down()
    r = report.to_dict()
    emit(
        r,
        as_json,
        f"fraud endpoint: {r['requests_per_s']:,.0f} req/s (rounds {r['subject_rates']}); "
        f"bare FastAPI: {r['reference_rate']:,.0f} req/s (rounds {r['reference_rates']}); "
        f"ratio {r['ratio']:.2f}\n"
        f"fraud endpoint latency at saturation: p50 {r['latency_ms']['p50']:.2f} ms, "
        f"p99 {r['latency_ms']['p99']:.2f} ms; peak RSS {r['peak_rss_mb']:,.0f} MB; server CPU "
        f"per request (us) {r['server_cpu_us_per_request']}\n"
        f"generator ceiling (canned server): {r['generator_ceiling_per_s']:,.0f} req/s; "
        f"generator CPU {r['generator_cpu_cores']} cores; {connections} connections, "
        f"{warmup:g} s warm-up + {duration:g} s per run; load average "
        f"{r['load_average']['before']} -> {r['load_average']['after']} on "
        f"{r['cpu_count']} CPUs",
    )
