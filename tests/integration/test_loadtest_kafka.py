"""`loadtest` with `target: kafka` and `target: scenario` against the real broker.

The lag and end-to-end figures are read from real topics: a stand-in job publishes
`pipeline.progress/1` records to the `metrics` topic exactly as `pipeline.metrics` does for a
running Spark job (its end offsets on the topic, per batch), and writes alerts naming the
produced records of planted incidents to the alerts topic. It processes a bounded number of
records per batch, so its lag grows under a spike and recovers after it.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from core.config import StackConfig
from core.contracts import topics
from core.contracts.events import PIPELINE_PROGRESS
from core.kafka import ensure_topics, producer_config
from core.kafka.clients import consumer_config
from streamsim.loadtest.config import LoadTestConfig
from streamsim.loadtest.run import run_loadtest
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.integration

CONTRACT = ["requests", "errors", "achieved_rate", "latency_ms", "slo", "ok"]


class StandInJob(threading.Thread):
    """Reads `topic` at most `per_batch` records a batch, every `batch_s`; publishes its
    progress to `metrics` and an alert per labelled event id in `planted`."""

    def __init__(
        self,
        stack: StackConfig,
        job: str,
        topic: str,
        per_batch: int,
        planted: set[str] | None = None,
        alerts_topic: str = "alerts",
        batch_s: float = 0.2,
    ) -> None:
        super().__init__(daemon=True)
        self.stack, self.job, self.topic = stack, job, topic
        self.per_batch, self.batch_s = per_batch, batch_s
        self.planted = planted or set()
        self.alerts_topic = alerts_topic
        self.stop_flag = threading.Event()
        self.alerted = 0
        ensure_topics(stack, [topic, topics.METRICS.name, alerts_topic], partitions=2)

    def run(self) -> None:
        consumer = Consumer(
            consumer_config(
                self.stack, f"standin-{uuid.uuid4().hex[:6]}", **{"max.poll.interval.ms": 600000}
            )
        )
        consumer.assign([TopicPartition(self.topic, p, 0) for p in (0, 1)])
        producer = Producer(producer_config(self.stack, **{"linger.ms": 0}))
        position = {0: 0, 1: 0}
        batch = 0
        while not self.stop_flag.is_set():
            for msg in consumer.consume(self.per_batch, timeout=self.batch_s):
                if msg.error():
                    continue
                position[msg.partition() or 0] = (msg.offset() or 0) + 1
                event_id = orjson.loads(msg.value() or b"{}").get("event_id")
                if event_id in self.planted:
                    alert = {"entity_id": "x", "event_ids": [event_id], "rule": "standin"}
                    producer.produce(self.alerts_topic, orjson.dumps(alert))
                    self.alerted += 1
            record = {
                "schema": PIPELINE_PROGRESS,
                "job": self.job,
                "query": f"{self.job}.q",
                "batch_id": batch,
                "end_offsets": {self.topic: {str(p): o for p, o in position.items()}},
            }
            producer.produce(topics.METRICS.name, orjson.dumps(record), f"{self.job}.q")
            producer.poll(0)
            batch += 1
            time.sleep(self.batch_s)
        producer.flush(10)
        consumer.close()


@pytest.fixture
def topic() -> str:
    return f"lt.kafka-{uuid.uuid4().hex[:8]}"


def config(**data: Any) -> LoadTestConfig:
    return LoadTestConfig.model_validate({"kind": "loadtest", "seed": 3, **data})


def test_spike_lag_recovers_and_slos_fail_when_impossible(
    kafka_stack: StackConfig, topic: str, tmp_path: Path
) -> None:
    job = f"standin-{uuid.uuid4().hex[:6]}"
    standin = StandInJob(kafka_stack, job, topic, per_batch=300)  # ~1,500 records/s
    standin.start()
    try:
        cfg = config(
            target={
                "type": "kafka",
                "topic": topic,
                "source": {"type": "payload", "bytes": 120, "keys": 50},
                "job": job,
                "alerts_topic": None,
                # The drain ends once the lag is back at 300; its deadline is for a loaded machine.
                "lag": {"sample_s": 0.25, "drain_s": 120, "recovered_at": 300},
            },
            load={"type": "spike", "rate": 200, "spike_rate": 4000, "at_s": 2, "for_s": 2},
            warmup_s=1,
            duration_s=4,
            # A recovery seen within the run and its drain is within 180 s: the check holds
            # whatever the machine's speed, and `lag_max` fails whatever it is.
            slo={"p99_ms": 5000, "lag_max": 1, "lag_recovery_s": 180},
        )
        report = run_loadtest(cfg, kafka_stack, "spike", tmp_path / "out")
    finally:
        standin.stop_flag.set()
        standin.join(10)
    assert list(report)[: len(CONTRACT) + 1] == [*CONTRACT[:4], "lag", *CONTRACT[4:]]
    assert report["errors"] == 0 and report["requests"] > 8000
    # The spike outran the stand-in's ~1,500/s: a lag of thousands, then back under 300.
    assert report["lag"]["max"] > 2000
    assert report["lag"]["recovery_s"] is not None and report["lag"]["recovery_s"] > 0
    assert report["slo"]["lag_recovery_s"]["ok"] is True
    lag_max = report["slo"]["lag_max"]
    assert lag_max["threshold"] == 1 and lag_max["ok"] is False
    assert lag_max["measured"] == report["lag"]["max"] > 2000  # the SLO judged the peak seen
    assert report["ok"] is False
    assert "end_to_end_ms" not in report  # not traced: left out, not zero
    assert (tmp_path / "out" / "lag_over_time.vl.json").exists()
    assert orjson.loads((tmp_path / "out" / "report.json").read_bytes())["lag"] == report["lag"]


def test_scenario_records_trace_planted_incidents_end_to_end(
    kafka_stack: StackConfig, topic: str, tmp_path: Path
) -> None:
    from streamsim.loadtest.kafka_target import plan_records

    cfg = config(
        target={
            "type": "kafka",
            "topic": topic,
            "source": {
                "type": "scenario",
                "file": str(REPO_ROOT / "config/scenarios/cards.yaml"),
            },
            "alerts_topic": f"{topic}.alerts",
            # ends 1 s after the last alert; the deadline is for a loaded machine
            "lag": {"drain_s": 60, "alerts_settle_s": 1},
        },
        load={"type": "constant", "rate": 1500},
        warmup_s=0.5,
        duration_s=3,
        # An alert read within the run (3.5 s), its flush (<= 35 s) and drain (<= 60 s) is
        # < 120 s after its record's send: the SLO holds whatever the machine's speed. The
        # produce latency and the achieved rate depend on it (CI's load once failed them).
        slo={"e2e_p99_ms": 120_000, "achieved_rate_fraction": None},
    )
    n = 4500
    planned = plan_records(cfg.target, kafka_stack, n, cfg.seed)  # type: ignore[arg-type]
    assert planned.planted, "the card scenario plants incidents"
    standin = StandInJob(
        kafka_stack,
        "e2e",
        topic,
        per_batch=5000,
        planted=set(planned.planted),
        alerts_topic=f"{topic}.alerts",
        batch_s=0.05,
    )
    standin.start()
    try:
        report = run_loadtest(cfg, kafka_stack, "e2e", tmp_path / "out")
    finally:
        standin.stop_flag.set()
        standin.join(10)
    assert standin.alerted > 0
    assert report["alerts_traced"] > 0
    e2e = report["end_to_end_ms"]
    assert set(e2e) == {"p50", "p99"}
    assert 0 < e2e["p50"] <= e2e["p99"] < 120_000
    assert report["slo"]["e2e_p99_ms"]["ok"] is True and report["ok"] is True, report["slo"]
    assert "lag" not in report  # no job named: left out
    assert report["payload_kinds"]["planted"] > 0


def test_scenario_target_drives_http_and_kafka_with_separate_slos(
    kafka_stack: StackConfig, topic: str, tmp_path: Path, endpoint: str
) -> None:
    cfg = config(
        target={
            "type": "scenario",
            "http": {
                "target": {"url": endpoint},
                "load": {"type": "constant", "rate": 100},
                "payload": {"cards": 500, "cities": 20, "merchants": 50},
                "client": {"connections": 8},
                # generous: a loaded CI machine answers late, and 3 s is a short window
                "slo": {"p99_ms": 5000, "achieved_rate_fraction": 0.5},
            },
            "kafka": {
                "target": {
                    "topic": topic,
                    "source": {"type": "payload"},
                    "alerts_topic": None,
                },
                "load": {"type": "constant", "rate": 300},
                "slo": {"p99_ms": 0.001},  # impossible: this path fails, the other holds
            },
        },
        warmup_s=0.5,
        duration_s=3,
    )
    report = run_loadtest(cfg, kafka_stack, "both", tmp_path / "out")
    http, kafka = report["paths"]["http"], report["paths"]["kafka"]
    assert list(report)[:6] == CONTRACT
    assert http["ok"] is True and http["requests"] > 200, http["slo"]
    assert kafka["ok"] is False and kafka["slo"]["p99_ms"]["ok"] is False
    assert kafka["requests"] > 600 and kafka["target"] == f"kafka:{topic}"
    assert report["ok"] is False
    assert (tmp_path / "out" / "http" / "report.json").exists()
    assert (tmp_path / "out" / "kafka" / "report.json").exists()
