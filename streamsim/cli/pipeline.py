"""`streamsim pipeline run JOB`: start a Spark job and report each batch as it completes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from streamsim.cli.common import ConfigOpt, JsonOpt, console, emit, stack_from
from streamsim.config import load_model
from streamsim.errors import StreamsimError

app = typer.Typer(help="Spark Structured Streaming jobs.")

PipelineOpt = Annotated[
    Path | None,
    typer.Option("--pipeline", help="Pipeline YAML. Default: config/pipelines/JOB.yaml."),
]


@app.command()
def run(
    job: Annotated[str, typer.Argument(help="The job, e.g. window-counts.")],
    pipeline_file: PipelineOpt = None,
    duration: Annotated[
        float | None,
        typer.Option(help="Stop after this many wall seconds (default: run until Ctrl-C)."),
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Start JOB's streaming queries; print rows, rates, watermark and late drops per batch."""
    from pipeline.config import PipelineConfig
    from pipeline.jobs import JOBS
    from pipeline.progress import BatchReport
    from pipeline.session import spark_session
    from streamsim.kafka import ensure_topics

    if job not in JOBS:
        raise StreamsimError(f"unknown job {job!r}; known jobs: {', '.join(sorted(JOBS))}")
    cfg = load_model(PipelineConfig, pipeline_file or Path("config/pipelines") / f"{job}.yaml")
    stack = stack_from(config)
    ensure_topics(stack, [*cfg.input_topics, cfg.output_topic, cfg.deadletter_topic])
    queries = JOBS[job](spark_session(stack, app=job), stack, cfg)
    console.print(
        f"started {len(queries)} queries ({cfg.trigger.mode} mode): "
        + ", ".join(q.name for q in queries)
    )
    seen: dict[str, int] = {}
    totals = {"batches": 0, "input_rows": 0, "dropped_by_watermark": 0}
    deadline = time.monotonic() + duration if duration else None
    try:
        while deadline is None or time.monotonic() < deadline:
            for query in queries:
                if query.exception() is not None:
                    raise StreamsimError(f"query {query.name} failed: {query.exception()}")
                for progress in query.recentProgress:
                    report = BatchReport.from_progress(progress)
                    if report.batch_id <= seen.get(report.query, -1):
                        continue
                    seen[report.query] = report.batch_id
                    totals["batches"] += 1
                    totals["input_rows"] += report.input_rows
                    totals["dropped_by_watermark"] += report.dropped_by_watermark
                    if not as_json and report.input_rows:
                        console.print(
                            f"{report.query} batch {report.batch_id}: {report.input_rows} rows, "
                            f"{report.processed_rows_per_s:,.0f} rows/s, watermark "
                            f"{report.watermark}, dropped late {report.dropped_by_watermark}",
                            highlight=False,
                        )
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        for query in queries:
            query.stop()
    emit(
        {"job": job, "mode": cfg.trigger.mode, **totals},
        as_json,
        f"stopped {job}: {totals['batches']} batches, {totals['input_rows']} rows, "
        f"{totals['dropped_by_watermark']} dropped as too late",
    )
