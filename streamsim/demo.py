"""`streamsim demo`: the whole local stack end to end, then a summary.

broker up -> (fraud endpoint up, state empty) -> pipeline job started at the topics' current
ends with fresh checkpoints
-> scenario simulated (into Kafka, or as POS terminals posting to the endpoint)
-> pipeline drained (or read to its end, then ended by an end-of-input reading)
-> evaluation against truth (where the scenario has one)
-> summary. Whatever the demo started, it stops.

End of input: an event-time job judges a reading once the watermark passes it, and the
watermark only moves with newer input, so the last `watermark` of a run would stay unjudged.
Where the scenario asks for it (`end_of_input`), the demo then sends one empty reading an hour
past the watermark (a vehicle or sensor id of its own, no values: no rule fires on it) and
waits until the job's queries have moved their watermark there: the stream's end, as a
bounded source ends (Flink's final watermark). Its stats window stays open and is left out
of parity.

Each run stands alone: its ids carry the run (`run_id`, so an earlier run of the same seed is
neither answered as repeats nor its alert ids skipped as already written), the pipeline starts
on fresh checkpoints at the topics' ends, and the endpoint with `rebuild_lookback_s: 0` (the
same cards at the same simulated times never meet another run's in a window).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from core.config import StackConfig, load_model
from core.config.loader import read_yaml
from core.contracts import SENSOR_READING, VEHICLE_TELEMETRY, labels, topics
from core.errors import StreamsimError
from core.kafka import ensure_topics, producer_config
from core.kafka.compacted import ensure_compacted
from core.kafka.offsets import end_offsets, records_since
from core.ports import port_in_use
from pipeline.config import PipelineConfig
from pipeline.progress import BatchReport, ProgressTotals
from runs import commands
from runs.health import HEALTH_PATH, wait_healthy
from streamsim.kafka.broker import local_broker
from streamsim.stackfile import write_stack_file


@dataclass(frozen=True)
class DemoScenario:
    """A scenario, the pipeline job that consumes it, and how the demo wires them."""

    scenario: Path
    pipeline: Path
    evaluation: str | None = None  # `streamsim evaluate` name, where truth can be scored
    endpoint: bool = False  # start the fraud endpoint; the simulator posts to it (POS mode)
    overrides: dict[str, Any] = field(default_factory=dict)  # demo-sized scenario settings
    inputs: list[str] | None = None  # the pipeline's input topics, if not its config's
    speed: float | None = None  # the demo's default speed, if not the scenario's
    end_of_input: dict[str, Any] | None = None  # the empty reading that ends the input
    entity_field: str = "vehicle_id"  # the field of `end_of_input` that keys its record
    settle_s: float = 0.0  # shipping: `drain_job` waits this long for its timers


#: 2,000 vehicles at 10x: 20 simulated minutes in 120 s. Faults at 0.15 per
#: driving hour each (the scenario's 0.05 x 3) give ~40 incidents per type in 20 minutes; the
#: connectivity (outages, skew, resets, duplicates) is the scenario's own.
SPEED_VEHICLES = 10.0
FAULTS_VEHICLES = {"rate_per_hour": dict.fromkeys(labels.VEHICLE_FAULTS, 0.15)}
#: The card demo covers ~2 simulated hours of 20,000 cards: compromised terminals at 5x the
#: scenario's rate so every fraud type has incidents (~10 each; the others ~20).
FRAUD_CARDS = {"compromised_terminal": {"rate_per_1k_card_hours": 0.25}}

#: Shipping: 8 ships and 1,500 boxes (of the scenario's 24 and 10,000) for four simulated
#: weeks at 20,000x (~2 minutes), with the scenario's incident rates; its voyages land days
#: late. The job re-scores a log `settle` (3 s) after its rows stop landing: the demo waits
#: that, and a few triggers, after the input ends.
SPEED_SHIPPING = 20_000.0
SHIPPING_FLEET = {
    "entities": 8 + 1_500 + 30,
    "classes": [
        {"name": "ship", "share": 8},
        {"name": "container", "share": 1_500},
        {"name": "port", "share": 30},
    ],
}
SCENARIOS: dict[str, DemoScenario] = {
    "cards": DemoScenario(
        Path("config/scenarios/cards.yaml"),
        Path("config/pipelines/cards.yaml"),
        evaluation="cards",
        endpoint=True,
        overrides={"entities": 20_000, "domain": {"fraud": FRAUD_CARDS}},
        # POS -> endpoint -> card activity -> Spark (Dunning ch. 6)
        inputs=[topics.CARDS_ACTIVITY.name],
    ),
    "sensors": DemoScenario(
        Path("config/scenarios/sensors.yaml"),
        Path("config/pipelines/sensors.yaml"),
        evaluation="sensors",
        end_of_input={"schema": SENSOR_READING.id, "sensor_id": "end-of-input"},
        entity_field="sensor_id",
    ),
    "vehicles": DemoScenario(
        Path("config/scenarios/vehicles.yaml"),
        Path("config/pipelines/vehicles.yaml"),
        evaluation="vehicles",
        speed=SPEED_VEHICLES,
        overrides={"domain": {"faults": FAULTS_VEHICLES}},
        end_of_input={"schema": VEHICLE_TELEMETRY.id, "vehicle_id": "end-of-input"},
    ),
    "shipping": DemoScenario(
        Path("config/scenarios/shipping.yaml"),
        Path("config/pipelines/shipping.yaml"),
        evaluation="shipping",
        speed=SPEED_SHIPPING,
        overrides=SHIPPING_FLEET,
        settle_s=10.0,
    ),
}
#: How far past the watermark the end-of-input reading goes: beyond any reading still unseen.
END_OF_INPUT_MS = 3_600_000
END_OF_INPUT_TIMEOUT_S = 300.0


def run_demo(
    stack: StackConfig,
    name: str,
    duration_s: float,
    speed: float | None,
    on_batch: Callable[[BatchReport], None] | None = None,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run scenario `name` for `duration_s` wall seconds at `speed` (default: the demo's, else
    the scenario's); `overrides`: scenario settings on top of the demo's (e.g. a smaller
    fleet)."""
    if name not in SCENARIOS:
        raise StreamsimError(f"unknown demo scenario {name!r}; known: {', '.join(SCENARIOS)}")
    plan = SCENARIOS[name]
    with contextlib.ExitStack() as started, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        started.enter_context(local_broker(stack))
        stack_file = work / "stack.yaml"
        env = write_stack_file(stack, stack_file)  # client secrets by environment only
        run_id = time.strftime("demo-%Y%m%d-%H%M%S")
        overrides = {**plan.overrides, "run_id": run_id, **(overrides or {})}
        if plan.endpoint:
            url = started.enter_context(_endpoint(stack, stack_file, work, env, run_id))
            overrides["domain"] = {
                **overrides.get("domain", {}),
                "delivery": "http",
                "endpoint": {"url": url},
            }
        scenario = _scenario_file(plan.scenario, overrides, speed or plan.speed, work)
        result, cfg = _run(stack, plan, scenario, (stack_file, env), duration_s, on_batch, run_id)
        since = result.pop("offsets_before")
        if plan.evaluation:  # while the broker is still up
            from pyspark.sql import SparkSession

            from streamsim.evaluate.report import evaluate, save

            spark = SparkSession.getActiveSession()
            prefix = result["simulation"]["id_prefix"]  # this run's, not the newest one's
            evaluation = evaluate(stack, plan.evaluation, spark, cfg, since, prefix)
            result["evaluation_file"] = str(save(evaluation, stack))
            # the job's own late drops too (shipping's, beside Spark's), from the metrics topic
            late = max(result["late_dropped"], evaluation["late_dropped"])
            result = {**evaluation, **result, "late_dropped": late}
    return result


@contextlib.contextmanager
def _endpoint(
    stack: StackConfig, stack_file: Path, work: Path, env: dict[str, str], run_id: str
) -> Iterator[str]:
    """`streamsim api` as a child process; yields its transactions URL once it is healthy.
    Its log is kept: `<dirs.data>/logs/<run_id>-api.log`."""
    host, port = stack.api.host, stack.api.port
    if port_in_use(host, port):
        raise StreamsimError(
            f"port {port} on {host} is taken, so the demo cannot start the fraud endpoint "
            "there: stop what holds it, or set api.port (or STREAMSIM_API_PORT)"
        )
    from api.fraud.settings import run_settings

    settings_file = work / "api.yaml"
    settings_file.write_text(yaml.safe_dump(run_settings()[0]))
    log_path = stack.dirs.data / "logs" / f"{run_id}-api.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = log_path.open("wb")
    command = commands.api(stack_file, settings_file)
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://{host}:{port}"
    try:
        wait_healthy(proc, f"{base}{HEALTH_PATH}", log_path)
        yield f"{base}/v1/transactions"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _scenario_file(
    path: Path, overrides: dict[str, Any], speed: float | None, work: Path
) -> tuple[Path, float]:
    """The scenario with the demo's overrides, and the speed it will run at."""
    from runs.overrides import apply_overrides

    data = apply_overrides(read_yaml(path), overrides)
    chosen = speed or float(data.get("pacing", {}).get("speed") or 1.0)
    out = work / path.name
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out, chosen


def _run(
    stack: StackConfig,
    plan: DemoScenario,
    scenario: tuple[Path, float],
    child: tuple[Path, dict[str, str]],
    duration_s: float,
    on_batch: Callable[[BatchReport], None] | None,
    run_id: str,
) -> tuple[dict[str, Any], PipelineConfig]:
    from pipeline.catalog import drain_job, start_job, stop_job
    from pipeline.metrics import MetricsPublisher

    cfg = load_model(PipelineConfig, plan.pipeline)
    if plan.inputs:
        cfg = cfg.model_copy(update={"input_topics": plan.inputs})
    sources, sinks = cfg.input_topics, [cfg.output_topic, cfg.deadletter_topic]
    truth = topics.truth(yaml.safe_load(scenario[0].read_text())["name"]).name
    ensure_topics(stack, [*sources, *sinks, truth])
    start = {t: end_offsets(stack, t) for t in [*sources, *sinks, truth]}
    run_stack = stack.model_copy(
        update={
            "dirs": stack.dirs.model_copy(update={"checkpoints": stack.dirs.checkpoints / run_id})
        }
    )
    offsets = {t: {str(p): o for p, o in start[t].items()} for t in sources}
    cfg = cfg.model_copy(update={"starting_offsets": json.dumps(offsets)})
    cfg = _own_profiles(stack, cfg)

    metrics = MetricsPublisher(stack, cfg.job, cfg.trigger.mode)
    totals = ProgressTotals(metrics, *([on_batch] if on_batch else []))
    queries = start_job(run_stack, cfg, totals)
    path, speed = scenario
    try:
        simulation = _simulate(path, child, duration_s * speed, speed, queries)
        if plan.end_of_input is None:
            drain_job(queries, run_stack, cfg, plan.settle_s or None)
        else:  # the end of input applies the last watermark: no idle trigger to wait for
            record = {**plan.end_of_input, "event_id": run_id}
            end = _end_of_input(stack, cfg, queries, record, plan.entity_field)
            simulation["end_of_input"] = end
    finally:
        stop_job(run_stack, cfg, queries, totals)
        metrics.close()
    result = {
        "scenario": path.stem,
        "late_dropped": totals.late_events(),
        "simulation": simulation,
        "pipeline": {
            "job": cfg.job,
            "mode": cfg.trigger.mode,
            "queries": totals.to_dict(),
            "outputs": {t: records_since(stack, t, start[t]) for t in sinks},
        },
        "offsets_before": start,  # where this run's records begin, for the evaluation
    }
    return result, cfg


def _own_profiles(stack: StackConfig, cfg: PipelineConfig) -> PipelineConfig:
    """The card job reads the profiles topic from its current end: the compacted topic may
    hold every earlier run's profiles (20,000 per demo), and this run's come after."""
    topic = cfg.cards.profiles_topic
    if cfg.job != "cards" or topic is None:
        return cfg
    ensure_compacted(stack, topic)
    offsets = {topic: {str(p): o for p, o in end_offsets(stack, topic).items()}}
    settings = cfg.cards.model_copy(update={"profiles_starting_offsets": json.dumps(offsets)})
    return cfg.model_copy(update={"cards": settings})


def _end_of_input(
    stack: StackConfig,
    cfg: PipelineConfig,
    queries: list[Any],
    record: dict[str, Any],
    entity_field: str,
) -> dict[str, Any]:
    """Once the queries have read their topics to the end, send the empty reading past every
    event time they saw, and wait until their watermarks pass every reading (see the module
    docstring); its event time and the watermark reached."""
    from confluent_kafka import Producer

    from pipeline.drain import drain_queries
    from pipeline.jobs.vehicles.job import watermark_of
    from pipeline.progress import newest_event_ms
    from pipeline.settings import duration_ms

    drain_queries(queries, stack)
    stateful = [q for q in queries if watermark_of(q) is not None]
    if not stateful:
        return {}
    seen = [newest_event_ms(q.recentProgress) for q in stateful]
    seen += [watermark_of(q) for q in stateful]
    target = max(m for m in seen if m is not None) + END_OF_INPUT_MS
    event_time = target + duration_ms(cfg.watermark)
    producer = Producer(producer_config(stack))
    value = {**record, "event_id": f"{record['event_id']}-end-of-input", "event_time": event_time}
    producer.produce(cfg.input_topics[0], orjson.dumps(value), key=str(record[entity_field]))
    producer.flush(30)
    deadline = time.monotonic() + END_OF_INPUT_TIMEOUT_S
    while time.monotonic() < deadline:
        behind = [q for q in stateful if (watermark_of(q) or 0) < target]
        if not behind:
            break
        failed = [q for q in behind if q.exception() is not None]
        if failed:
            raise StreamsimError(f"query {failed[0].name} failed: {failed[0].exception()}")
        time.sleep(0.5)
    else:
        raise StreamsimError(
            f"the queries did not reach the end-of-input watermark in {END_OF_INPUT_TIMEOUT_S:.0f}s"
        )
    drain_queries(queries, stack)
    return {"event_time": event_time, "watermark_ms": target}


def _simulate(
    scenario: Path,
    child: tuple[Path, dict[str, str]],
    sim_s: float,
    speed: float,
    queries: list[Any],
) -> dict[str, Any]:
    """The simulator as a child process (its own core), while Spark runs in this one;
    `child`: its stack file and environment."""
    stack_file, env = child
    command = commands.simulate(scenario, stack_file=stack_file, speed=speed, duration_s=sim_s)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command, stdout=out, stderr=err, env=env)
        while proc.poll() is None:
            failed = [q for q in queries if q.exception() is not None]
            if failed:
                proc.terminate()
                raise StreamsimError(f"query {failed[0].name} failed: {failed[0].exception()}")
            time.sleep(0.5)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            tail = err.read().decode(errors="replace")[-3000:]
            raise StreamsimError(f"the simulator failed:\n{tail}")
        summary: dict[str, Any] = orjson.loads(out.read().strip().splitlines()[-1])
    return summary
