"""`streamsim pipeline run JOB`: start a Spark job and report each batch as it completes;
`streamsim pipeline package`: zip the code a job's executors import, for a Spark cluster."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Annotated

import typer

from core.config import load_model
from core.errors import StreamsimError
from streamsim.cli.common import ConfigOpt, JsonOpt, console, domain_name, emit, stack_from

app = typer.Typer(help="Spark Structured Streaming jobs.")

PipelineOpt = Annotated[
    Path | None,
    typer.Option("--pipeline", help="Pipeline YAML. Default: config/pipelines/JOB.yaml."),
]
DurationOpt = Annotated[
    float | None,
    typer.Option(
        help="Stop after this many wall seconds (default: run until Ctrl-C, or until every "
        "query finished, as with trigger available_now)."
    ),
]
DrainOpt = Annotated[
    bool,
    typer.Option(
        "--drain",
        help="Stop once the queries have processed what their topics hold at the start (a "
        "backfill, or one pass on a cluster; shipping: and its settle timers have fired).",
    ),
]


@app.command()
def run(
    job: Annotated[str, typer.Argument(help="The job, e.g. sensors.", callback=domain_name)],
    pipeline_file: PipelineOpt = None,
    duration: DurationOpt = None,
    drain: DrainOpt = False,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Start JOB's streaming queries; print rows, rates, watermark and late drops per batch.
    SIGUSR1 (`pipeline.signals.DRAIN_SIGNAL`) drains it: what its topics hold then, then stop."""
    from pipeline.catalog import drain_job, start_job, stop_job
    from pipeline.config import PipelineConfig
    from pipeline.metrics import MetricsPublisher
    from pipeline.progress import BatchReport, ProgressTotals, no_batches
    from pipeline.signals import DRAIN_SIGNAL
    from pipeline.triggers import query_mode, query_note

    if drain and duration:
        raise StreamsimError("--drain and --duration both say when to stop: give one of them")
    cfg = load_model(PipelineConfig, pipeline_file or Path("config/pipelines") / f"{job}.yaml")
    if cfg.job != job:
        raise StreamsimError(f"{pipeline_file} configures job {cfg.job!r}, not {job!r}")

    def show(report: BatchReport) -> None:
        if not as_json and report.input_rows:
            console.print(
                f"{report.query} batch {report.batch_id}: {report.input_rows} rows, "
                f"{report.processed_rows_per_s:,.0f} rows/s, watermark {report.watermark}, "
                f"late events dropped {report.late_events}",
                highlight=False,
            )

    drain_asked = threading.Event()  # set before the queries start: a request is never lost
    signal.signal(DRAIN_SIGNAL, lambda *_: drain_asked.set())
    stack = stack_from(config)
    metrics = MetricsPublisher(stack, cfg.job, cfg.trigger.mode)
    totals = ProgressTotals(show, metrics)
    queries = start_job(stack, cfg, totals)
    modes = {str(q.name): query_mode(q) or cfg.trigger.mode for q in queries}
    console.print(f"started {len(queries)} queries:", highlight=False)
    for query in queries:
        note = query_note(query)
        console.print(
            f"  {query.name}: {modes[str(query.name)]}" + (f" ({note})" if note else ""),
            highlight=False,
        )
    deadline = time.monotonic() + duration if duration else None
    try:
        if drain:
            drain_job(queries, stack, cfg)
        while not drain and (deadline is None or time.monotonic() < deadline):
            failed = [q for q in queries if q.exception() is not None]
            if failed:
                raise StreamsimError(f"query {failed[0].name} failed: {failed[0].exception()}")
            if not any(q.isActive for q in queries):
                break  # every query has finished: an available_now trigger read all input
            if drain_asked.wait(0.5):
                console.print(f"draining {job}: asked by {DRAIN_SIGNAL.name}", highlight=False)
                drain_job(queries, stack, cfg)
                break
    except KeyboardInterrupt:
        pass
    finally:
        stop_job(stack, cfg, queries, totals)
        metrics.close()
    queries_totals = totals.to_dict()
    for name, mode in modes.items():
        queries_totals.setdefault(name, no_batches())  # a query stopped before its first
        queries_totals[name]["mode"] = mode
    emit(
        {"job": job, "mode": cfg.trigger.mode, "queries": queries_totals},
        as_json,
        f"stopped {job}: "
        + "; ".join(
            f"{name} ({t['mode']}): {t['batches']} batches, {t['input_rows']:,} rows, "
            f"{t['late_events']:,} events dropped as too late"
            for name, t in queries_totals.items()
        ),
    )


@app.command()
def parity(
    job: Annotated[
        str, typer.Argument(help="The job; only vehicles has an oracle.", callback=domain_name)
    ],
    pipeline_file: PipelineOpt = None,
    tolerance: Annotated[
        float, typer.Option(min=0, help="Relative tolerance of means and percentiles.")
    ] = 1e-9,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Recompute JOB's window stats in batch over the offsets its latest run read and compare
    them with what the stream published; every difference must be explained by late drops.
    Exit code 1 when one is not."""
    from pipeline.config import PipelineConfig
    from pipeline.jobs.vehicles import job as vehicles
    from pipeline.jobs.vehicles.parity import vehicle_stats_parity
    from pipeline.session import spark_session

    if job != vehicles.NAME:
        raise StreamsimError(f"no batch oracle for {job!r}; parity covers vehicles")
    cfg = load_model(PipelineConfig, pipeline_file or Path("config/pipelines") / f"{job}.yaml")
    stack = stack_from(config)
    spark = spark_session(stack, app=f"{job}-parity")
    try:
        report = vehicle_stats_parity(spark, stack, cfg, tolerance=tolerance)
    finally:
        spark.stop()
    r = report.to_dict()
    emit(
        r,
        as_json,
        f"{job} stats parity (query {r['query_id']}, {r['batches']} batches): "
        f"{r['windows']:,} closed windows, {r['matching']:,} match the batch oracle, "
        f"{r['explained_by_late']:,} differ only by {r['late_events']:,} late readings, "
        f"{r['unexplained']:,} unexplained ({r['open_windows']:,} windows still open)"
        + ("" if report.ok else f"\nfirst unexplained: {r['mismatches'][:3]}"),
    )
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def package(
    out: Annotated[Path, typer.Option(help="The zip to write.", dir_okay=False)] = Path(
        ".data/streamsim-packages.zip"
    ),
    as_json: JsonOpt = False,
) -> None:
    """Zip the packages a job's executors import (core, detectors, pipeline). A session on a
    cluster master ships one by itself; this zip is for `spark.submit.pyFiles` in the stack
    config, `spark-submit --py-files` or a container image."""
    from pipeline.packaging import EXECUTOR_PACKAGES, write_packages_zip

    files = write_packages_zip(out)
    emit(
        {"zip": str(out.resolve()), "packages": list(EXECUTOR_PACKAGES), "files": files},
        as_json,
        f"wrote {out} ({files} files); ship it to executors with "
        f"spark.submit.pyFiles={out.resolve()}",
    )
