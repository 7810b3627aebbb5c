"""`streamsim bench simulator | pipeline | api | divergence`: a subject against a reference,
same run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from streamsim.cli.common import ConfigOpt, JsonOpt, domain_name, emit, err_console, stack_from
from streamsim.kafka.broker import local_broker

app = typer.Typer(
    help="Benchmarks: each reports a ratio against a reference measured in the same run."
)


def announce() -> None:
    err_console.print("starting the local broker (stopped again afterwards)")


@app.command()
def simulator(
    scenario: Annotated[Path, typer.Option(help="Scenario YAML.")] = Path(
        "config/scenarios/sensors.yaml"
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
    with local_broker(stack, announce):
        report = bench_simulator(stack, scenario, events, rounds, entities)
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


@app.command(name="pipeline")
def pipeline_bench(
    job: Annotated[
        str | None,
        typer.Option(
            callback=domain_name,
            help="cards, vehicles, sensors or shipping: the whole job (all its queries) vs "
            "its logic on the rate source and vs Kafka read + parse + one window (the floor). "
            "Unset: the vehicle stats query and Real-time Mode phases.",
        ),
    ] = None,
    keys: Annotated[
        int | None,
        typer.Option(
            min=10,
            help="--job: keys (default 20,000 cards, 2,000 vehicles, 2,000 sensors: 200,000 "
            "readings span 10 minutes, so the rules' windows close; the shipping scenario's "
            "10,054 ships, containers and ports).",
        ),
    ] = None,
    events: Annotated[
        int, typer.Option(min=20_000, help="Events for the throughput phases.")
    ] = 200_000,
    batch_events: Annotated[
        int, typer.Option(min=10_000, help="Events per micro-batch (maxOffsetsPerTrigger).")
    ] = 50_000,
    entities: Annotated[int, typer.Option(min=10, help="Vehicles in the fleet.")] = 2_000,
    latency_s: Annotated[
        float, typer.Option(min=20, help="Seconds of paced input for the alert latency.")
    ] = 120.0,
    latency_vehicles: Annotated[
        int,
        typer.Option(
            min=10,
            help="Vehicles (1 Hz each) of the paced fleet; --job cards: transactions/s.",
        ),
    ] = 500,
    pipeline: Annotated[
        Path | None,
        typer.Option(
            "--pipeline",
            dir_okay=False,
            help="--job: bench the job under this pipeline YAML (e.g. one with another "
            "rules_form). Default: config/pipelines/JOB.yaml.",
        ),
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A Spark job on 2 cores. --job JOB: the whole job's sustained events/s draining a topic
    (its second run, in a warm JVM) vs the same logic on Spark's rate-micro-batch source (noop
    sinks) and vs Kafka read + parse + one 1-minute window on the same topics (the floor),
    alert latency at a paced load (cards, vehicles), peak RSS. Without: the vehicle stats query
    vs its aggregation on the rate source."""
    from streamsim.bench.pipeline import JOBS, bench_job, bench_pipeline

    if job is not None and job not in JOBS:
        raise typer.BadParameter(f"{job}: one of {', '.join(JOBS)}", param_hint="--job")
    stack = stack_from(config)

    def progress(step: str) -> None:
        err_console.print(f"bench pipeline: {step}", highlight=False)

    with local_broker(stack, announce):
        if job is not None:
            report = bench_job(
                stack,
                job,
                events=events,
                batch_events=batch_events,
                keys=keys,
                latency_s=latency_s,
                latency_rate=latency_vehicles,
                progress=progress,
                pipeline=pipeline,
            )
        else:
            report = bench_pipeline(
                stack,
                events=events,
                batch_events=batch_events,
                entities=entities,
                latency_s=latency_s,
                latency_vehicles=latency_vehicles,
                progress=progress,
            )
    r = report.to_dict()
    emit(r, as_json, job_text(r) if job is not None else pipeline_text(r))


def _ms(figures: object) -> str:
    return (
        "n/a"
        if not isinstance(figures, dict)
        else f"p50 {figures['p50']:,.0f} ms, p99 {figures['p99']:,.0f} ms"
    )


def job_text(r: dict[str, object]) -> str:
    rss = r.get("peak_rss_mb")
    latency = (
        f"alert end-to-end latency (micro-batch, watermark {r['latency_watermark']}): "
        f"{_ms(r.get('latency_ms'))} over {r['latency_alerts']} alerts "
        f"({r['latency_alerted_planted']} of {r['latency_planted']} planted)\n"
        if "latency_alerts" in r
        else "alert latency: no paced phase for this job\n"
    )
    return (
        f"{r['job']}, whole job on {r['cores']} cores, {r['keys']:,} keys: "
        f"{r['events_per_s']:,.0f} events/s sustained, warm (a cold JVM: "
        f"{r.get('cold_events_per_s', 0):,.0f}; per query, sharing the cores: "
        f"{r['queries_events_per_s']}); its logic on the rate source: "
        f"{r['reference_rate']:,.0f} rows/s; ratio {r['ratio']:.2f}\n"
        f"floor (Kafka read + parse + one 1-minute window): {r['floor_rate']:,.0f} events/s; "
        f"job / floor {r['floor_ratio']:.2f} (target >= {r['floor_target']})\n"
        f"{latency}"
        f"state on disk {r['state_mb']:,.1f} MB; peak RSS "
        f"{'n/a' if rss is None else f'{rss:,.0f} MB'}; load average {r['load_average']}"
    )


def pipeline_text(r: dict[str, object]) -> str:
    ms = _ms
    rtm = r["realtime_mode"]
    assert isinstance(rtm, dict)
    return (
        f"stats query: {r['events_per_s']:,.0f} events/s; the same aggregation on the rate "
        f"source: {r['reference_rate']:,.0f} rows/s; ratio {r['ratio']:.2f} "
        f"(target 100,000 events/s)\n"
        f"whole job on {r['cores']} cores: {r['job_events_per_s']:,.0f} events/s "
        f"(per query, sharing the cores: {r['job_queries_events_per_s']})\n"
        f"alert end-to-end latency (micro-batch): {ms(r.get('latency_ms'))} over "
        f"{r['latency_alerts']} alerts (target p99 2,000 ms)\n"
        f"{rtm['query']}: Real-time Mode {ms(rtm['latency_ms'])}; micro-batch "
        f"{ms(rtm['microbatch_latency_ms'])}\n"
        f"peak RSS {r['peak_rss_mb']:,.0f} MB; load average {r['load_average']}"
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
    durability: Annotated[
        str | None,
        typer.Option(help="The endpoint's durability setting: ack, log or none. Default: its own."),
    ] = None,
    generator: Annotated[
        str,
        typer.Option(
            help="Load generator: ours (closed loop), wrk (Debian's wrk with a Lua script, "
            "instead) or both (ours, plus a wrk section: the cross-check)."
        ),
    ] = "ours",
    wrk_threads: Annotated[int, typer.Option(min=1, help="wrk's threads (-t).")] = 1,
    api_set: Annotated[
        list[str] | None,
        typer.Option(
            "--set", help="An endpoint setting KEY=VALUE (YAML value), e.g. max_in_flight=64."
        ),
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fraud endpoint vs a bare FastAPI endpoint (same uvicorn settings), saturated."""
    from streamsim.bench.api import bench_api

    if generator not in ("ours", "wrk", "both"):
        raise typer.BadParameter(f"{generator!r}: ours, wrk or both", param_hint="--generator")
    if durability not in (None, "ack", "log", "none"):
        raise typer.BadParameter(f"{durability!r}: ack, log or none", param_hint="--durability")
    stack = stack_from(config)
    with local_broker(stack, announce):
        report = bench_api(
            stack,
            connections=connections,
            warmup_s=warmup,
            duration_s=duration,
            rounds=rounds,
            durability=durability,
            generator=generator,  # type: ignore[arg-type]
            wrk_threads=wrk_threads,
            settings=dict(item.split("=", 1) for item in api_set or []),
            progress=lambda step: err_console.print(f"bench api: {step}", highlight=False),
        )
    r = report.to_dict()
    wrk = r.get("wrk")
    wrk_line = (
        f"\nwrk ({wrk_threads} thread(s)): fraud endpoint {wrk['subject']['requests_per_s']:,.0f} "
        f"req/s, p50 {wrk['subject']['latency_ms']['p50']:.2f} ms, p99 "
        f"{wrk['subject']['latency_ms']['p99']:.2f} ms; bare FastAPI "
        f"{wrk['reference']['requests_per_s']:,.0f} req/s; ratio {wrk['ratio']:.2f}; ours/wrk "
        f"on the endpoint {r['requests_per_s'] / wrk['subject']['requests_per_s']:.2f}"
        if wrk
        else ""
    )
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
        f"{r['cpu_count']} CPUs; durability {r['durability']}, generator {r['generator']}"
        + wrk_line,
    )


@app.command(name="divergence")
def divergence_bench(
    events: Annotated[int, typer.Option(min=10, help="Requests of the seeded stream.")] = 2000,
    seed: Annotated[int, typer.Option(help="The stream's seed.")] = 33,
    cards: Annotated[
        int, typer.Option(min=1, help="Card population (fewer: cards come back more often).")
    ] = 300,
    instances: Annotated[int, typer.Option(min=2, help="Endpoint instances.")] = 2,
    rate: Annotated[float, typer.Option(min=1, help="Requests per second sent.")] = 200.0,
    concurrency: Annotated[
        int,
        typer.Option(
            min=1, help="Requests in flight (1: each card's requests decided in stream order)."
        ),
    ] = 1,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Verdicts of N endpoint instances vs one instance's on the same seeded card stream, with
    card affinity (each card to one instance by a hash of its token) and without."""
    from streamsim.bench.divergence import run_divergence

    stack = stack_from(config)
    with local_broker(stack, announce):
        r = run_divergence(
            stack,
            events=events,
            seed=seed,
            cards=cards,
            instances=instances,
            rate=rate,
            concurrency=concurrency,
        )
    lines = [
        f"{events:,} requests ({r['cards']} cards, seed {seed}) at {rate:g}/s, {concurrency} "
        f"in flight; one instance decided {r['single']['decisions']}"
    ]
    for affinity, run in r["affinity"].items():
        lags = ", ".join(
            f"p50 {lag.get('p50', '-')} p99 {lag.get('p99', '-')} max {lag.get('max', '-')}"
            for lag in run["follow_lag_ms"]
        )
        lines.append(
            f"{instances} instances, affinity {affinity}: {run['decisions_differ']} decisions and "
            f"{run['rules_differ']} fired-rule sets differ of {run['compared']:,} "
            f"{run['rules_differ_by_rule']}; {run['handoffs']:,} handoffs "
            f"({run['handoffs_within_follow_lag_p99']} within the follow lag's p99); "
            f"follow lag ms per instance: {lags}"
        )
    emit(r, as_json, "\n".join(lines))
