"""`streamsim demo`: the whole local stack end to end, then a summary.

broker up -> pipeline job started at the topics' current ends -> scenario simulated into Kafka
-> pipeline drained -> counts read back -> summary (and the broker stopped if the demo started it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from pipeline.config import PipelineConfig
from pipeline.progress import BatchReport, ProgressTotals
from streamsim.config import StackConfig, load_model
from streamsim.errors import StreamsimError
from streamsim.kafka import ensure_topics
from streamsim.kafka.broker import LocalBroker
from streamsim.kafka.offsets import end_offsets, records_since


@dataclass(frozen=True)
class DemoScenario:
    """A scenario file and the pipeline job that consumes it."""

    scenario: Path
    pipeline: Path


SCENARIOS: dict[str, DemoScenario] = {
    "sensor-fleet": DemoScenario(
        Path("config/scenarios/sensor_fleet.yaml"), Path("config/pipelines/window-counts.yaml")
    ),
}


def run_demo(
    stack: StackConfig,
    name: str,
    duration_s: float,
    speed: float,
    on_batch: Callable[[BatchReport], None] | None = None,
) -> dict[str, Any]:
    if name not in SCENARIOS:
        raise StreamsimError(f"unknown demo scenario {name!r}; known: {', '.join(SCENARIOS)}")
    plan = SCENARIOS[name]
    broker = None if stack.kafka.external else LocalBroker(stack)
    started_broker = broker is not None and not broker.status().running
    if broker is not None:
        broker.up()
    try:
        return _run(stack, plan, duration_s, speed, on_batch)
    finally:
        if started_broker and broker is not None:
            broker.down()


def _run(
    stack: StackConfig,
    plan: DemoScenario,
    duration_s: float,
    speed: float,
    on_batch: Callable[[BatchReport], None] | None,
) -> dict[str, Any]:
    from pipeline.jobs import start_job
    from pipeline.metrics import MetricsPublisher

    cfg = load_model(PipelineConfig, plan.pipeline)
    source = cfg.input_topics[0]
    ensure_topics(stack, [source, cfg.output_topic, cfg.deadletter_topic])
    start = {t: end_offsets(stack, t) for t in (source, cfg.output_topic, cfg.deadletter_topic)}
    run_id = time.strftime("demo-%Y%m%d-%H%M%S")
    run_stack = stack.model_copy(
        update={
            "dirs": stack.dirs.model_copy(update={"checkpoints": stack.dirs.checkpoints / run_id})
        }
    )
    offsets = {source: {str(p): o for p, o in start[source].items()}}
    cfg = cfg.model_copy(update={"starting_offsets": json.dumps(offsets)})

    metrics = MetricsPublisher(stack, cfg.job, cfg.trigger.mode)
    totals = ProgressTotals(metrics, *([on_batch] if on_batch else []))
    queries = start_job(run_stack, cfg, totals)
    try:
        simulation = _simulate(stack, plan.scenario, duration_s, speed, queries)
        for query in queries:
            query.processAllAvailable()
    finally:
        for query in queries:
            query.stop()
        metrics.close()
    return {
        "scenario": plan.scenario.stem,
        "paths": {},
        "late_dropped": totals.dropped_by_watermark(),
        "simulation": simulation,
        "pipeline": {
            "job": cfg.job,
            "mode": cfg.trigger.mode,
            "queries": totals.to_dict(),
            "windows_emitted": records_since(stack, cfg.output_topic, start[cfg.output_topic]),
            "deadlettered": records_since(stack, cfg.deadletter_topic, start[cfg.deadletter_topic]),
        },
    }


def _simulate(
    stack: StackConfig, scenario: Path, duration_s: float, speed: float, queries: list[Any]
) -> dict[str, Any]:
    """The simulator as a child process (its own core), while Spark runs in this one."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as stack_file:
        yaml.safe_dump(stack.model_dump(mode="json"), stack_file)
        stack_file.flush()
        command = [
            sys.executable, "-m", "streamsim", "simulate", str(scenario),
            "--duration", str(duration_s), "--speed", str(speed), "--sink", "kafka",
            "--config", stack_file.name, "--json",
        ]  # fmt: skip
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            while proc.poll() is None:
                failed = [q for q in queries if q.exception() is not None]
                if failed:
                    proc.terminate()
                    raise StreamsimError(f"query {failed[0].name} failed: {failed[0].exception()}")
                time.sleep(0.5)
            out, err = proc.communicate()
    if proc.returncode != 0:
        raise StreamsimError(f"the simulator failed:\n{err.decode(errors='replace')[-3000:]}")
    summary: dict[str, Any] = orjson.loads(out.strip().splitlines()[-1])
    return summary
