"""`streamsim evaluate SCENARIO`: score decisions against truth."""

from __future__ import annotations

from typing import Annotated

import typer

from streamsim.cli.common import ConfigOpt, JsonOpt, emit, stack_from


def evaluate(
    scenario: Annotated[str, typer.Argument(help="card-velocity or connected-vehicles.")],
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Join the endpoint's verdicts and the pipeline's alerts with truth; score per label type."""
    from streamsim.evaluate.report import evaluate as run_evaluation
    from streamsim.evaluate.report import save

    stack = stack_from(config)
    report = run_evaluation(stack, scenario)
    path = save(report, stack)
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
    lines.append(
        f"  late dropped {report['late_dropped']:,}; alerts on hard negatives "
        f"{report['hard_negative_alerts']}"
        + (f"; alerts of no scored type (false positives) {unknown}" if unknown else "")
    )
    return "\n".join(lines)


def _num(x: float | None) -> str:
    """A figure to 3 places, or "n/a" where undefined (precision without detections)."""
    return "n/a" if x is None else f"{x:.3f}"
