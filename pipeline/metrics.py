"""Query progress published to the `metrics` topic, so the UI and any consumer can watch rates,
watermarks and late drops without talking to Spark."""

from __future__ import annotations

import time

import orjson
from confluent_kafka import Producer

from core.config import StackConfig
from core.contracts import topics
from core.contracts.events import PIPELINE_PROGRESS
from core.kafka import ensure_topics, producer_config
from pipeline.progress import BatchReport

METRICS_TOPIC = topics.METRICS.name


class MetricsPublisher:
    """`publisher(report)` sends one `pipeline.progress/1` record keyed by query name."""

    def __init__(self, stack: StackConfig, job: str, mode: str) -> None:
        ensure_topics(stack, [METRICS_TOPIC])
        self.job = job
        self.mode = mode
        self._producer = Producer(producer_config(stack, **{"linger.ms": 50}))

    def __call__(self, report: BatchReport) -> None:
        record = {
            "schema": PIPELINE_PROGRESS,
            "job": self.job,
            "mode": self.mode,
            "at": time.time_ns() // 1_000_000,
            **report.to_dict(),
        }
        self._producer.produce(METRICS_TOPIC, orjson.dumps(record), report.query)
        self._producer.poll(0)

    def close(self) -> None:
        self._producer.flush(10)
