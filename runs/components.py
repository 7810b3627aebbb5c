"""What one run starts besides the simulator, and in which order it starts and stops them.

A run is the whole scenario (`runs.manager.RunManager`):
- `simulator`: `streamsim simulate` into Kafka, or in POS mode posting to the endpoint;
- `job`: the Spark job reading the scenario's events, `streamsim pipeline run JOB` on the run's
  own checkpoints and its own copy of the pipeline config: the pipeline file (under
  `config/pipelines/`) whose `input_topics` hold the default topic of the scenario's domain
  type, reading the run's topic (the endpoint's activity topic in POS mode);
- `endpoint`: the fraud endpoint, `streamsim api` on a free port, for a card scenario in POS
  mode (`domain.delivery: http`): the simulator posts to it, it publishes its decisions.

Start order: endpoint (the simulator waits for its health check), job, simulator. Stop order:
simulator (no new events), job (once it drained what was sent, or after a timeout), endpoint
(last: the simulator may still post while it stops). This module is pure logic: the plan and
the order; `runs.commands` holds the command lines, `runs.manager` runs the processes.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import ValidationError

from core.config import ConfigError
from core.config.loader import read_yaml
from pipeline.config import PipelineConfig
from scenarios.catalog import ScenarioConfig

Component = Literal["simulator", "job", "endpoint"]
COMPONENTS: tuple[Component, ...] = get_args(Component)
START_ORDER: tuple[Component, ...] = ("endpoint", "job", "simulator")
STOP_ORDER: tuple[Component, ...] = ("simulator", "job", "endpoint")
ComponentState = Literal["starting", "running", "exited", "stopped"]
#: Each component's clean stop, sent to its process group (SIGKILL follows after a grace
#: period). The job's is its Ctrl-C: `pipeline run` then stops its queries and flushes its
#: metrics, and its JVM (which ignores SIGINT) exits when the driver's pipe closes; a SIGTERM
#: would end the driver at once, its queries unstopped.
STOP_SIGNALS: dict[Component, signal.Signals] = {
    "simulator": signal.SIGTERM,  # `simulate` flushes what it holds to Kafka
    "job": signal.SIGINT,
    "endpoint": signal.SIGTERM,  # uvicorn's graceful shutdown
}
POS_DOMAIN = "cards"


class InvalidComponents(ValueError):
    """A `components` request the scenario cannot satisfy; the message says what it has."""


@dataclass(frozen=True)
class Pipeline:
    """One pipeline config file and what it validates to."""

    file: Path
    config: PipelineConfig


@dataclass(frozen=True)
class Plan:
    """The components of one run in start order, and the job's pipeline and input topics."""

    components: tuple[Component, ...]
    pipeline: Pipeline | None = None
    job_inputs: tuple[str, ...] = ()

    @property
    def job(self) -> str | None:
        return self.pipeline.config.job if self.pipeline else None

    def stop_order(self) -> tuple[Component, ...]:
        return stop_order(self.components)


def stop_order(components: Iterable[Component]) -> tuple[Component, ...]:
    """`components` in the order a run stops them: simulator, job, endpoint."""
    chosen = set(components)
    return tuple(c for c in STOP_ORDER if c in chosen)


def start_order(components: Iterable[Component]) -> tuple[Component, ...]:
    chosen = set(components)
    return tuple(c for c in START_ORDER if c in chosen)


def load_pipelines(folder: Path) -> list[Pipeline]:
    """Every `kind: pipeline` file of `folder` that validates (sorted by name); a broken one is
    left out here and reported by `streamsim config check`."""
    out = []
    for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        try:
            data = read_yaml(path)
            if data.get("kind") != "pipeline":
                continue
            out.append(Pipeline(path, PipelineConfig.model_validate(data)))
        except (ConfigError, ValidationError):
            continue
    return out


def default_topic(scenario: ScenarioConfig) -> str | None:
    """The topic the scenario's domain type writes to by default (None: several, or none)."""
    field = type(scenario.domain).model_fields.get("topic")
    default = field.default if field is not None else None
    return default if isinstance(default, str) else None


def pos_mode(scenario: ScenarioConfig) -> bool:
    """A card scenario posting each transaction to the fraud endpoint."""
    return scenario.domain.type == POS_DOMAIN and getattr(scenario.domain, "delivery", "") == "http"


def pipeline_for(scenario: ScenarioConfig, pipelines: Sequence[Pipeline]) -> Pipeline | None:
    """The pipeline whose input topics hold the default topic of the scenario's domain type."""
    topic = default_topic(scenario)
    return next((p for p in pipelines if topic and topic in p.config.input_topics), None)


def plan_components(
    scenario: ScenarioConfig,
    pipelines: Sequence[Pipeline],
    *,
    activity_topic: str,
    requested: Sequence[str] | None = None,
    available: Iterable[Component] = COMPONENTS,
) -> Plan:
    """What a run of `scenario` starts: everything it needs (`requested` None), or the
    `requested` subset, which must hold the simulator and only what the scenario needs.
    `available`: what the manager can start (no job nor endpoint without a stack)."""
    pipeline = pipeline_for(scenario, pipelines)
    needed: list[Component] = ["simulator"]
    if pipeline is not None:
        needed.append("job")
    if pos_mode(scenario):
        needed.append("endpoint")
    can = set(available)
    if requested is None:
        chosen = [c for c in needed if c in can]
    else:
        unknown = [c for c in requested if c not in COMPONENTS]
        if unknown:
            raise InvalidComponents(f"unknown components {unknown}; known: {list(COMPONENTS)}")
        if "simulator" not in requested:
            raise InvalidComponents("components must include the simulator")
        extra = [c for c in requested if c not in needed]
        if extra:
            raise InvalidComponents(
                f"scenario {scenario.name or scenario.domain.type} has no {extra[0]}: "
                f"it needs {needed}"
            )
        missing = [c for c in requested if c not in can]
        if missing:
            raise InvalidComponents(f"this API cannot start {missing}: it runs without a stack")
        chosen = [c for c in needed if c in requested]
    if "job" not in chosen or pipeline is None:
        return Plan(start_order(chosen))
    topic = getattr(scenario.domain, "topic", None)
    inputs = (activity_topic,) if pos_mode(scenario) else (str(topic),)
    return Plan(start_order(chosen), pipeline, inputs)


def job_pipeline(plan: Plan, starting_offsets: Mapping[str, Mapping[int, int]]) -> dict[str, Any]:
    """The run's copy of the job's pipeline config: the run's input topics, read from where they
    end now (`starting_offsets`: topic -> partition -> offset) on fresh checkpoints."""
    assert plan.pipeline is not None
    data = read_yaml(plan.pipeline.file)
    data["input_topics"] = list(plan.job_inputs)
    offsets = {
        t: {str(p): o for p, o in sorted(parts.items())} for t, parts in starting_offsets.items()
    }
    data["starting_offsets"] = json.dumps(offsets, sort_keys=True)
    PipelineConfig.model_validate(data)  # what `pipeline run` will load
    return data


def job_progress(
    queries: Iterable[Mapping[str, Any]], job: str, since_ms: int
) -> list[dict[str, Any]]:
    """The latest report per query of `job` made since `since_ms` (the job's start: an earlier
    run's reports of the same job are not this run's), by query name."""
    rows = [
        dict(q)
        for q in queries
        if q.get("job") == job and isinstance(q.get("at"), int | float) and q["at"] >= since_ms
    ]
    return sorted(rows, key=lambda q: str(q.get("query")))


__all__ = [
    "COMPONENTS",
    "STOP_SIGNALS",
    "Component",
    "ComponentState",
    "InvalidComponents",
    "Pipeline",
    "Plan",
    "job_pipeline",
    "job_progress",
    "load_pipelines",
    "plan_components",
    "start_order",
    "stop_order",
]
