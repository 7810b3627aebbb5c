"""The `simulator.run/1` record: what a finished run was, published to the `metrics` topic.

Evaluation reads it to scope a scenario's latest run (`id_prefix`) and to map wall-clock
decision times back onto simulated time (`anchor`), so detection latency is measured from the
true time of an incident.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from confluent_kafka import Producer

from core.config import StackConfig
from core.contracts import topics
from core.contracts.events import SIMULATOR_RUN
from core.kafka import ensure_topics, producer_config
from simulators.engine import RunSummary

METRICS_TOPIC = topics.METRICS.name
SCHEMA = SIMULATOR_RUN


def run_record(scenario: str, seed: int, summary: RunSummary) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "scenario": scenario,
        "seed": seed,
        "finished_at": time.time_ns() // 1_000_000,
        **summary.to_json(),
    }


def publish_run_record(stack: StackConfig, scenario: str, seed: int, summary: RunSummary) -> None:
    ensure_topics(stack, [METRICS_TOPIC])
    producer = Producer(producer_config(stack))
    producer.produce(METRICS_TOPIC, orjson.dumps(run_record(scenario, seed, summary)), scenario)
    if producer.flush(30) != 0:
        raise RuntimeError(f"the run record of {scenario} was not delivered to {METRICS_TOPIC}")
