"""`streamsim demo`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from streamsim.cli.common import ConfigOpt, JsonOpt, console, domain_name, emit, stack_from
from streamsim.cli.evaluate import human as evaluation_summary

DEFAULT_SCENARIO = "cards"


def demo(
    scenario: Annotated[
        str,
        typer.Option(
            callback=domain_name,
            help="cards (endpoint + pipeline + evaluation), vehicles "
            "(pipeline + evaluation with parity), shipping (four simulated weeks, job "
            "shipping, evaluation of the five incident types) or sensors (pipeline + "
            "evaluation of the job's alerts).",
        ),
    ] = DEFAULT_SCENARIO,
    duration: Annotated[
        float, typer.Option(min=1, help="Wall seconds to run the scenario for.")
    ] = 120.0,
    speed: Annotated[
        float | None,
        typer.Option(min=0.01, help="Simulated seconds per wall second (default: the scenario's)."),
    ] = None,
    headless: Annotated[
        bool,
        typer.Option(help="Accepted for the contract; the demo never opens the control panel."),
    ] = True,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Start the local stack, run a scenario through endpoint and pipeline, print a summary
    (the evaluation against truth)."""
    from pipeline.progress import BatchReport
    from streamsim.demo import run_demo

    def show(report: BatchReport) -> None:
        if not as_json and report.input_rows:
            console.print(
                f"  {report.query} batch {report.batch_id}: {report.input_rows:,} rows "
                f"at {report.processed_rows_per_s:,.0f}/s, watermark {report.watermark}, "
                f"late dropped {report.late_events}",
                highlight=False,
            )

    from pipeline.session import spark_log_file

    stack = stack_from(config)
    if not as_json:
        console.print(f"demo: {scenario} for {duration:g} s")
        console.print(
            f"Spark, JVM and Kafka client logs: {_shown(spark_log_file(stack))}", highlight=False
        )
    result = run_demo(stack, scenario, duration, speed, on_batch=show)
    emit(result, as_json, _human(result))


def _shown(path: Path) -> str:
    """`path` relative to the working directory where it is inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _human(result: dict[str, Any]) -> str:
    sim, pipe = result["simulation"], result["pipeline"]
    rows = max((q["input_rows"] for q in pipe["queries"].values()), default=0)
    outputs = ", ".join(f"{n:,} to {t}" for t, n in pipe["outputs"].items())
    lines = [
        f"simulated {sim['events']:,} events ({sim['duplicates']:,} duplicates, "
        f"{sim['dropped']:,} dropped in transit, {sim['outages']:,} outages) at "
        f"{sim['events_per_s']:,.0f} events/s",
        f"pipeline {pipe['job']} ({pipe['mode']}): {rows:,} events read by "
        f"{len(pipe['queries'])} queries; {outputs}; "
        f"{result['late_dropped']:,} events too late for the watermark",
    ]
    if "paths" in result:
        lines.append(evaluation_summary(result))
    return "\n".join(lines)
