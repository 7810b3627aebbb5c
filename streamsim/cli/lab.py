"""`streamsim lab watermark`: the waiting-vs-discarding trade-off, one stream, many watermarks."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Any

import typer

from streamsim.cli.common import ConfigOpt, JsonOpt, domain_name, emit, err_console, stack_from

app = typer.Typer(help="Experiments on one seeded stream.", no_args_is_help=True)

DETAIL = ("provisional",)  # per-point figures beside the `--json` contract


@app.command()
def watermark(
    scenario: Annotated[
        str, typer.Option("--scenario", help="e.g. vehicles.", callback=domain_name)
    ],
    watermarks: Annotated[
        str, typer.Option("--watermarks", help="Comma-separated, e.g. 0s,5s,30s,2m,10m.")
    ] = "0s,5s,30s,2m,10m",
    events: Annotated[int, typer.Option("--events", min=100, help="Records simulated.")] = 200_000,
    seed: Annotated[int | None, typer.Option("--seed", help="Overrides the scenario's.")] = None,
    max_offsets: Annotated[
        int | None,
        typer.Option(
            "--max-offsets",
            min=1,
            help="Records per micro-batch (default: replay 250, spark 5000).",
        ),
    ] = None,
    times: Annotated[
        str | None,
        typer.Option(
            "--times",
            help="Window on event_time, corrected_event_time or both (comma-separated): "
            "each watermark once per time (default: every time the job has).",
        ),
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine",
            help="spark: the job per point on a produced topic; replay (vehicles): its "
            "watermark and detectors on the parsed stream, no Spark (default: replay where "
            "the scenario has it).",
        ),
    ] = None,
    entities: Annotated[
        int | None,
        typer.Option(
            "--entities", min=1, help="The stream's (default: replay 50, else the scenario's)."
        ),
    ] = None,
    duration_s: Annotated[
        float | None,
        typer.Option(
            "--duration-s",
            min=1,
            help="Simulated seconds at most (default: replay 3900, else the scenario's).",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", file_okay=False, help="Default: <dirs.data>/lab/<scenario>-<UTC>."),
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Replay one seeded stream through the scenario's job once per watermark and time;
    per point: completeness, late drops, parity with the batch oracle (spark), recall,
    precision and result latency. Writes report.json and a Vega-Lite chart."""
    from streamsim.lab.watermark import (
        CLOCK_JOBS,
        REPLAY_BATCH,
        REPLAY_STREAM,
        TIMES,
        parse_times,
        parse_watermarks,
        save,
        sweep,
    )

    stack = stack_from(config)
    marks = parse_watermarks(watermarks)
    default_times = ",".join(TIMES) if scenario in CLOCK_JOBS else "event_time"
    picked = parse_times(times or default_times, scenario)
    how = engine or ("replay" if scenario in REPLAY_STREAM else "spark")
    shape = REPLAY_STREAM.get(scenario, {}) if how == "replay" else {}
    batch = max_offsets or (REPLAY_BATCH if how == "replay" else 5_000)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = out or Path(stack.dirs.data) / "lab" / f"{scenario}-{stamp}"

    def progress(i: int, n: int, mark: str) -> None:
        err_console.print(f"watermark {i + 1}/{n}: {mark}", highlight=False)

    report = sweep(
        stack,
        scenario,
        marks,
        events,
        seed,
        folder / "work",
        batch,
        progress,
        on_point=lambda so_far: save(so_far, folder),  # kept if a later point fails
        times=picked,
        engine=how,
        entities=entities or (int(shape["entities"]) if shape else None),
        duration_s=duration_s or shape.get("duration_s"),
    )
    files = save(report, folder)
    emit(contract(report), as_json, summary(report) + f"\nreport: {files[0]}")


def contract(report: dict[str, Any]) -> dict[str, Any]:
    """The `--json` shape: scenario and points, each point without its detail (`provisional`,
    kept in report.json).

    >>> contract({"scenario": "s", "events": 9, "points": [{"recall": 1, "provisional": {}}]})
    {'scenario': 's', 'points': [{'recall': 1}]}
    """
    points = [{k: v for k, v in p.items() if k not in DETAIL} for p in report["points"]]
    return {"scenario": report["scenario"], "points": points}


def summary(report: dict[str, Any]) -> str:
    lines = [
        f"{report['scenario']}: {report['events']:,} records over {report['span_s']:,.0f} s, "
        f"{report['max_offsets']:,} per batch, one {report['engine']} run per watermark",
        "time        watermark_s  completeness  late_dropped  parity  recall  precision  "
        "latency p50/p99 ms",
    ]
    for p in report["points"]:
        lat = p["latency_ms"]
        time = "corrected" if p.get("time") == "corrected_event_time" else "event_time"
        lines.append(
            f"{time:<10}  {p['watermark_s']:>11g}  {p['completeness']!s:>12}  "
            f"{p['late_dropped']:>12,}  "
            f"{p['parity']!s:>6}  {p['recall']!s:>6}  {p['precision']!s:>9}  "
            f"{lat['p50']}/{lat['p99']}"
        )
    for p in report["points"]:
        if "provisional" in p:
            lines.append(provisional_line(p))
    pt = report["processing_time"]
    lines.append(
        f"a {pt['window_s']} s processing-time window instead: "
        f"{pt['records_in_another_window']:,} records ({pt['share_in_another_window']:.1%}) "
        f"counted in another window than their event time's; total count error "
        f"{pt['total_count_error']:,}; worst window {pt['worst_window']}"
    )
    return "\n".join(lines)


def provisional_line(point: dict[str, Any]) -> str:
    """The update-mode variant against the final rows, at one watermark."""
    v, final = point["provisional"], point["latency_ms"]
    return (
        f"watermark {point['watermark_s']:g} s, provisional (update mode): first row at "
        f"p50 {v['latency_ms']['p50']} ms against the final row's {final['p50']} ms; "
        f"{v['provisional_rows']:,} provisional rows for {v['windows']:,} closed windows and "
        f"{v['open']:,} still open, "
        f"{v['corrections']:,} corrections, {v['changed']:,} windows whose first value was "
        f"not the final one, {v['provisional_after_final']:,} written after the final row"
    )
