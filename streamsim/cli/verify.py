"""`streamsim verify-stream`: measure a stream's disorder against its truth; with a scenario
config, check each figure against the configured parameters (exit 1 when one is off)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from core.config import ConfigError, StackConfig, load_stack
from streamsim.cli.common import JsonOpt, console, emit
from streamsim.config.kinds import load_file

if TYPE_CHECKING:  # numpy and the scenario models load only when the command runs
    from scenarios.catalog import ScenarioConfig

ConfigsOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--config",
        help="A scenario YAML (to check figures against its parameters) and/or a stack YAML "
        "(to reach Kafka); give --config twice for both.",
        dir_okay=False,
    ),
]


def split_configs(paths: list[Path]) -> tuple[StackConfig, ScenarioConfig | None]:
    from scenarios.catalog import ScenarioConfig

    stack: StackConfig | None = None
    scenario: ScenarioConfig | None = None
    for path in paths:
        kind, model = load_file(path)
        if isinstance(model, StackConfig) and stack is None:
            stack = model
        elif isinstance(model, ScenarioConfig) and scenario is None:
            scenario = model
        else:
            raise ConfigError(path, [f"one stack and one scenario config at most; {kind!r} again"])
    return stack or load_stack(None), scenario


def verify_stream(
    events: Annotated[
        Path | None,
        typer.Option(help="A JSONL run: DIR with events.jsonl + truth.jsonl, or events FILE."),
    ] = None,
    truth: Annotated[
        Path | None, typer.Option(help="Truth JSONL (default: truth.jsonl beside the events).")
    ] = None,
    topic: Annotated[str | None, typer.Option(help="Kafka topic of the events.")] = None,
    truth_topic: Annotated[
        str | None, typer.Option(help="Kafka topic of the truth, e.g. truth.sensors.")
    ] = None,
    config: ConfigsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Out-of-order fractions, lateness, clock skew, duplicates, drops and backlogs vs. truth."""
    if (events is None) == (topic is None):
        raise typer.BadParameter("give either --events (JSONL) or --topic (Kafka)")
    if topic is not None and truth_topic is None:
        raise typer.BadParameter("--topic needs --truth-topic", param_hint="--truth-topic")
    from streamsim.verify import read_jsonl, read_kafka, verify

    stack, scenario = split_configs(config or [])
    if events is not None:
        stream, truth_records = read_jsonl(events, truth)
    else:
        assert topic is not None and truth_topic is not None
        stream, truth_records = read_kafka(stack, topic, truth_topic)
    report = verify(stream, truth_records, scenario)
    emit(report, as_json, None if as_json else _human(report))
    if report.get("ok") is False:
        raise typer.Exit(1)


def _human(r: dict[str, Any]) -> str:
    late, skew = r["lateness_s"], r["skew_s"]
    lines = [
        f"records {r['records']:,} ({r['events']:,} events), truth {r['truth_records']:,}",
        f"out of order: {r['out_of_order_fraction']:.4f} globally, "
        f"{r['out_of_order_fraction_by_key']:.4f} within a key",
        f"lateness (emit - true): p50 {late['p50']:.3f}s  p99 {late['p99']:.3f}s  "
        f"max {late['max']:.3f}s",
        f"clock skew per device: mean {skew['mean']:.3f}s  std {skew['std']:.3f}s "
        f"({skew['devices']:,} devices)",
        f"duplicates {r['duplicate_fraction']:.4f}, drops {r['drop_fraction']:.4f}, "
        f"largest backlog {r['max_backlog']:,}; lost {r['lost']}, unexpected {r['unexpected']}",
    ]
    for name, c in r.get("checks", {}).items():
        mark = "[green]ok[/]  " if c["ok"] else "[red]FAIL[/]"
        low, high = c["tolerance"]
        lines.append(
            f"{mark} {name:32} {c['measured']:>9.4g} vs {c['expected']:<9.4g}"
            f" [{low:.4g}, {high:.4g}]"
        )
    if "ok" in r:
        lines.append("[green]all checks pass[/]" if r["ok"] else "[red]some checks failed[/]")
    return "\n".join(lines)


__all__ = ["console", "verify_stream"]
