"""`streamsim evaluate SCENARIO`: score decisions against truth."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
import typer

from streamsim.cli.common import ConfigOpt, JsonOpt, domain_name, emit, err_console, stack_from

#: The keys of `evaluate --suite --json` (docs/design.md); the saved report has more.
SUITE_KEYS = ("suite", "scenario", "split", "runs", "types", "hard_negative_rate", "ok")


def evaluate(
    scenario: Annotated[
        str, typer.Argument(help="cards, vehicles, shipping or sensors.", callback=domain_name)
    ],
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    suite: Annotated[
        Path | None,
        typer.Option(
            "--suite",
            help="A suite file (config/suites/): run the scenario over its seeds and variants "
            "at full speed and score them; exit 1 below its thresholds.",
        ),
    ] = None,
    run: Annotated[
        str | None,
        typer.Option(
            "--run",
            help="Score this run: the event-id prefix of its simulator.run/1 record (the "
            "`id_prefix` of `simulate --json`). Default: the scenario's newest run.",
        ),
    ] = None,
    pipeline: Annotated[
        Path | None,
        typer.Option(
            "--pipeline",
            help="The job's pipeline YAML (its detectors and starting offsets) for the batch "
            "oracle. Default: the scenario's file under config/pipelines/.",
            dir_okay=False,
        ),
    ] = None,
    settings: Annotated[
        Path | None,
        typer.Option(
            "--settings",
            help="The fraud endpoint's settings YAML: its decisions are read from its `topic`. "
            "Default: cards.activity.",
            dir_okay=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write the report to this file instead of <dirs.data>/evaluations/.",
            dir_okay=False,
        ),
    ] = None,
    alerts_topic: Annotated[
        str | None,
        typer.Option(
            "--alerts-topic",
            help="Score a foreign job's alerts (docs/contracts.md) from this topic instead of "
            "our endpoint and pipeline.",
        ),
    ] = None,
    alerts_file: Annotated[
        Path | None,
        typer.Option(
            "--alerts-file",
            help="Score a foreign job's alerts from this JSON-lines file (one alert a line).",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    verdicts: Annotated[
        Literal["auto", "endpoint", "simulator"],
        typer.Option(
            "--verdicts",
            help="cards: whose verdicts the endpoint path scores: `endpoint` (its decisions on "
            "cards.activity), `simulator` (what the endpoint answered a POS-mode run, recorded "
            "on cards.verdicts) or `auto` (the endpoint's, else the simulator's).",
        ),
    ] = "auto",
) -> None:
    """Join the endpoint's verdicts and the pipeline's alerts (or a foreign job's: --alerts-topic,
    --alerts-file) with truth; score per label type."""
    foreign = alerts_topic is not None or alerts_file is not None
    if suite is not None:
        if run or pipeline or settings or out or foreign:
            raise typer.BadParameter(
                "--suite runs its own runs: no --run, --pipeline, --settings, --out or --alerts-*",
                param_hint="--suite",
            )
        _suite(scenario, suite, config, as_json)
        return
    if foreign and (alerts_topic is not None) == (alerts_file is not None):
        raise typer.BadParameter("one of --alerts-topic and --alerts-file", param_hint="--alerts-*")
    if foreign and verdicts != "auto":
        raise typer.BadParameter(
            "--verdicts picks the endpoint path's verdicts; not with --alerts-*",
            param_hint="--verdicts",
        )
    if foreign and (pipeline or settings):
        raise typer.BadParameter(
            "a foreign job's alerts are scored alone: no --pipeline or --settings",
            param_hint="--alerts-*",
        )
    from core.config import load_model
    from pipeline.config import PipelineConfig
    from streamsim.evaluate.report import evaluate as run_evaluation
    from streamsim.evaluate.report import save

    stack = stack_from(config)
    cfg = load_model(PipelineConfig, pipeline) if pipeline is not None else None
    topic = None
    if settings is not None:
        from api.fraud.settings import load_settings

        topic = load_settings(settings).topic
    alerts, source = None, ""
    if alerts_topic is not None:
        from streamsim.evaluate.foreign import topic_values

        alerts, source = topic_values(stack, alerts_topic), f"topic {alerts_topic}"
    elif alerts_file is not None:
        from streamsim.evaluate.foreign import file_values

        alerts, source = file_values(alerts_file), f"file {alerts_file}"
    report = run_evaluation(
        stack,
        scenario,
        pipeline=cfg,
        id_prefix=run,
        endpoint_topic=topic,
        alerts=alerts,
        alerts_source=source,
        verdicts=verdicts,
    )
    if out is None:
        path = save(report, stack)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_name(out.name + ".part")
        part.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
        path = part.replace(out)  # whole: a reader never sees half a report
    emit(report, as_json, human(report) + f"\n(saved to {path})")


def human(report: dict) -> str:
    lines = [f"[bold]{report['scenario']}[/] (run {report['run']['id_prefix']}*)"]
    for path, labels in report["paths"].items():
        for label, f in labels.items():
            latency = f.get("latency_ms")
            lat = (
                f", latency p50 {latency['p50']:,.0f} ms p99 {latency['p99']:,.0f} ms"
                if latency
                else ""
            )
            upload = f.get("latency_from_upload_ms")  # shipping: from the port flush
            if upload:
                lat += f" (from upload p50 {upload['p50']:,.0f} ms)"
            opened = f", {f['open']} open" if "open" in f else ""
            lines.append(
                f"  {path:9} {label:22} precision {_num(f['precision'])} "
                f"(incidents {_num(f.get('incident_precision'))}) recall {_num(f['recall'])} "
                f"F1 {_num(f['f1'])} (support {f['support']}{opened}){lat}"
            )
    unknown = {
        f"{path}:{label}": n
        for path, labels in (report.get("unknown_label_alerts") or {}).items()
        for label, n in labels.items()
    }
    late = f"late dropped {report['late_dropped']:,}; " if "late_dropped" in report else ""
    lines.append(
        f"  {late}alerts on hard negatives {report['hard_negative_alerts']}"
        + (f"; alerts of no scored type (false positives) {unknown}" if unknown else "")
    )
    if "foreign" in report:
        lines.append(foreign_human(report["foreign"]))
    if "verdicts" in report:
        lines.append(verdicts_human(report["verdicts"]))
    return "\n".join(lines)


def foreign_human(found: dict[str, Any]) -> str:
    """What a foreign source held: read, scored, and what was not scored, and why."""
    reasons = ", ".join(f"{r} {n}" for r, n in found["rejected_by_reason"].items())
    rejected = f"[red]{found['rejected']:,} rejected[/] ({reasons})" if reasons else "0 rejected"
    return (
        f"  {found['source']}: {found['read']:,} records, {found['scored']:,} scored, "
        f"{rejected}, {found['other_runs']:,} of other runs, "
        f"{found['repeated_alert_ids']:,} repeated alert ids"
    )


def verdicts_human(found: dict[str, Any]) -> str:
    """What the endpoint answered a POS-mode run, as the simulator recorded it."""
    outcomes = ", ".join(f"{k} {n:,}" for k, n in found["outcomes"].items() if n)
    decisions = ", ".join(f"{k} {n:,}" for k, n in found["decisions"].items())
    one = found["any_fraud"]
    latency = found.get("latency_ms")
    lat = f"; latency p50 {latency['p50']:,.0f} ms p99 {latency['p99']:,.0f} ms" if latency else ""
    typed = " (types attributed from truth: no precision per type)" if found["attributed"] else ""
    return (
        f"  verdicts from the {found['source']}: {found['requests']:,} requests ({outcomes}); "
        f"decisions {decisions or 'none'}{lat}; any fraud: precision {_num(one['precision'])} "
        f"recall {_num(one['recall'])}{typed}"
    )


def _num(x: float | None) -> str:
    """A figure to 3 places, or "n/a" where undefined (precision without detections)."""
    return "n/a" if x is None else f"{x:.3f}"


def _suite(scenario: str, file: Path, config: Path | None, as_json: bool) -> None:
    from streamsim.evaluate.suite import load_suite, run_suite, save_suite

    stack = stack_from(config)
    spec = load_suite(file)
    quiet = as_json or not sys.stderr.isatty()
    report = run_suite(
        spec,
        scenario,
        stack,
        progress=None if quiet else (lambda line: err_console.print(f"  {line}")),
    )
    path, chart = save_suite(report, stack)
    summary = {k: report[k] for k in SUITE_KEYS}
    emit(summary, as_json, suite_human(report) + f"\n(saved to {path}; chart {chart})")
    if not report["ok"]:
        raise typer.Exit(1)


def suite_human(report: dict[str, Any]) -> str:
    t = report["thresholds"]
    lines = [
        f"[bold]{report['suite']}[/] {report['scenario']} ({report['split']} split, "
        f"{report['runs']} runs, path {report['path']})"
    ]
    for label, f in report["types"].items():
        mean, worst = f["mean"], f["worst"]
        lines.append(
            f"  {label:22} mean: precision {_num(mean['precision'])} incidents "
            f"{_num(mean['incident_precision'])} recall {_num(mean['recall'])} F1 "
            f"{_num(mean['f1'])} | worst: incidents {_num(worst['incident_precision'])} "
            f"recall {_num(worst['recall'])}"
        )
    lines.append(
        f"  hard-negative alert rate {report['hard_negative_rate']:.4f} (at most "
        f"{t['hard_negative_rate']}); worst recall and incident precision at least "
        f"{t['recall']} / {t['incident_precision']}: "
        + ("[green]ok[/]" if report["ok"] else "[red]below[/]")
    )
    return "\n".join(lines)
