"""`streamsim simulate SCENARIO_YAML`: run a scenario into Kafka or JSONL files."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from core.config import ConfigError
from core.contracts.topics import truth
from streamsim.cli.common import ConfigOpt, JsonOpt, emit, err_console, fail, stack_from
from streamsim.config.kinds import load_file

if TYPE_CHECKING:  # the engine (numpy, simpy) loads only when a command runs it
    from scenarios.catalog import ScenarioConfig
    from simulators import Progress as EngineProgress
    from simulators import RunSummary
    from simulators.sinks import Sink

SinkName = Literal["kafka", "jsonl"]


def load_scenario(path: Path) -> ScenarioConfig:
    from scenarios.catalog import ScenarioConfig

    kind, model = load_file(path)
    if not isinstance(model, ScenarioConfig):
        raise ConfigError(path, [f"expected a scenario config (kind: scenario), got kind {kind!r}"])
    return model


def _stop_on_sigterm() -> None:
    """SIGTERM stops a run like Ctrl-C: the engine's `finally` closes the sink, so the Kafka
    producer flushes what it holds (exit 130) instead of dying with records in its buffer. The
    control API stops the runs it started this way."""

    def interrupt(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the flush
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def parse_speed(value: str | None) -> float | str | None:
    if value is None or value == "max":
        return value
    try:
        speed = float(value)
    except ValueError:
        speed = 0.0
    if speed <= 0:
        raise typer.BadParameter(f"{value!r}: use a positive number or 'max'", param_hint="--speed")
    return speed


def simulate(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML (kind: scenario).")],
    seed: Annotated[int | None, typer.Option(help="Override the scenario's seed.", min=0)] = None,
    duration: Annotated[
        float | None, typer.Option("--duration", help="Simulated seconds to generate.")
    ] = None,
    events: Annotated[
        int | None, typer.Option("--events", help="Stop after this many event records.", min=1)
    ] = None,
    speed: Annotated[
        str | None, typer.Option(help="Simulated seconds per wall second, or 'max'.")
    ] = None,
    sink: Annotated[SinkName, typer.Option(help="Where to write: kafka or jsonl.")] = "kafka",
    out: Annotated[
        Path | None, typer.Option(help="Directory for --sink jsonl (events.jsonl, truth.jsonl).")
    ] = None,
    control: Annotated[
        Path | None,
        typer.Option(
            help='A JSON file polled while the run goes on: {"speed": X or "max", "max_rate": '
            "events/s or null} retunes pacing live (the control panel writes it)."
        ),
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a scenario: events in emit order to the scenario's topic, truth to truth.<name>."""
    if duration is not None and events is not None:
        raise typer.BadParameter("give --duration or --events, not both", param_hint="--events")
    if duration is not None and duration <= 0:
        raise typer.BadParameter(f"{duration}: must be > 0", param_hint="--duration")
    chosen_speed = parse_speed(speed)
    _stop_on_sigterm()
    scenario_config = load_scenario(scenario)
    stack = stack_from(config)
    target = make_sink(sink, out, config)
    with _progress_bar(enabled=not as_json and sys.stderr.isatty()) as on_progress:
        from scenarios.catalog import run_scenario
        from simulators.pacing import PacingControl

        summary = run_scenario(
            scenario_config,
            target,
            events=events,
            duration_s=duration,
            speed=chosen_speed,
            seed=seed,
            progress=on_progress,
            stack=stack,
            control=None if control is None else PacingControl(control),
        )
    if sink == "kafka":
        from simulators.run_record import publish_run_record

        chosen_seed = scenario_config.seed if seed is None else seed
        publish_run_record(stack, scenario_config.name, chosen_seed, summary)
    where = f"{out}/events.jsonl" if sink == "jsonl" else _topics(scenario_config)
    http = summary.details.get("http")
    if http:  # POS mode: the events went to the endpoint, truth to the sink
        truth_to = f"{out}/truth.jsonl" if sink == "jsonl" else truth(scenario_config.name).name
        where = f"{http['url']} (POS mode; truth to {truth_to})"
    emit(summary.to_json(), as_json, _human(summary, where))
    if summary.failed:
        detail = "; ".join(summary.errors) or "no detail from the client"
        raise fail(f"{summary.failed} records were not delivered: {detail}", 1)


def make_sink(name: SinkName, out: Path | None, config: Path | None) -> Sink:
    from simulators.sinks import JsonlSink

    if name == "jsonl":
        if out is None:
            raise typer.BadParameter("--sink jsonl needs --out DIR", param_hint="--out")
        return JsonlSink(out)
    if out is not None:
        raise typer.BadParameter("--out is only for --sink jsonl", param_hint="--out")
    from simulators.sinks.kafka import KafkaSink  # confluent-kafka only when needed

    return KafkaSink(stack_from(config))


def _topics(config: ScenarioConfig) -> str:
    return f"topics {config.domain.topic} and {truth(config.name).name}"


def _human(s: RunSummary, where: str) -> str:
    text = (
        f"[green]done[/]: {s.events:,} events ({s.duplicates:,} duplicates) and {s.truth:,} "
        f"truth records to {where}\n"
        f"  dropped {s.dropped:,}, outages {s.outages:,}, simulated {s.sim_s:,.0f}s "
        f"in {s.wall_s:,.1f}s wall: [bold]{s.events_per_s:,.0f} events/s[/]"
    )
    http = s.details.get("http")
    if http:
        text += (
            f"\n  HTTP: {http['ok']:,} of {http['requests']:,} requests answered 2xx, "
            f"status {http['status']}, decisions {http['decisions']}, "
            f"{http['failed']:,} failed, latency {http['latency_ms']}"
        )
    return text


class _progress_bar:
    """A rich progress bar on stderr (events, rate, backlog, simulated time), or nothing."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Progress | None = None
        self.task = TaskID(0)

    def __enter__(self) -> _progress_bar | None:
        if not self.enabled:
            return None
        self.bar = Progress(
            TextColumn("[bold]simulate[/]"),
            BarColumn(),
            TextColumn("{task.fields[events]:>12,} events"),
            TextColumn("{task.fields[rate]:>10,.0f} ev/s"),
            TextColumn("backlog {task.fields[backlog]:>8,}"),
            TextColumn("sim {task.fields[sim]:>8,.0f}s"),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
        )
        self.bar.start()
        self.task = self.bar.add_task("run", total=None, events=0, rate=0.0, backlog=0, sim=0.0)
        return self

    def __call__(self, p: EngineProgress) -> None:
        assert self.bar is not None
        total = p.target_events if p.target_events else p.target_sim_s
        done = p.events if p.target_events else min(p.sim_s, p.target_sim_s)
        elapsed = self.bar.tasks[0].elapsed or 0.0
        rate = p.events / elapsed if elapsed > 0 else 0.0
        self.bar.update(
            self.task,
            total=total,
            completed=done,
            events=p.events,
            rate=rate,
            backlog=p.backlog,
            sim=p.sim_s,
        )

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
