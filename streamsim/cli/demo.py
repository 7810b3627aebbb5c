"""`streamsim demo`."""

from __future__ import annotations

from typing import Annotated

import typer

from streamsim.cli.common import ConfigOpt, JsonOpt, console, emit, stack_from


def demo(
    scenario: Annotated[str, typer.Option(help="Which scenario to run.")] = "sensor-fleet",
    duration: Annotated[
        float, typer.Option(min=1, help="Simulated seconds to run the scenario for.")
    ] = 60.0,
    speed: Annotated[
        float, typer.Option(min=0.01, help="Simulated seconds per wall second.")
    ] = 1.0,
    headless: Annotated[
        bool, typer.Option(help="No control panel (the demo has no UI page yet; always headless).")
    ] = True,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Start the local stack, run a scenario through the pipeline, print a summary."""
    from pipeline.progress import BatchReport
    from streamsim.demo import run_demo

    def show(report: BatchReport) -> None:
        if not as_json and report.input_rows:
            console.print(
                f"  {report.query} batch {report.batch_id}: {report.input_rows:,} rows "
                f"at {report.processed_rows_per_s:,.0f}/s, watermark {report.watermark}, "
                f"late dropped {report.dropped_by_watermark}",
                highlight=False,
            )

    if not as_json:
        console.print(f"demo: {scenario} for {duration:g} simulated s at speed {speed:g}")
    result = run_demo(stack_from(config), scenario, duration, speed, on_batch=show)
    sim, pipe = result["simulation"], result["pipeline"]
    rows = max((q["input_rows"] for q in pipe["queries"].values()), default=0)
    emit(
        result,
        as_json,
        f"simulated {sim['events']:,} events ({sim['duplicates']:,} duplicates, "
        f"{sim['dropped']:,} dropped in transit, {sim['outages']:,} outages) at "
        f"{sim['events_per_s']:,.0f} events/s\n"
        f"pipeline {pipe['job']} ({pipe['mode']}): {rows:,} events read by "
        f"{len(pipe['queries'])} queries, {pipe['windows_emitted']:,} windows emitted, "
        f"{result['late_dropped']:,} events too late for the watermark, "
        f"{pipe['deadlettered']:,} dead-lettered",
    )
