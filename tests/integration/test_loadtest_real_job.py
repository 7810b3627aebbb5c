"""`loadtest` with `target: kafka` and `target: scenario` against the real `cards` Spark
job on the session broker: the lag comes from the `pipeline.progress/1` records the job's own
listener publishes (`pipeline.metrics.MetricsPublisher`, as `streamsim pipeline run` does), and
the end-to-end latency from the alerts the job writes for the scenario's planted incidents."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.config import StackConfig
from core.kafka import ensure_topics
from pipeline.config import PipelineConfig
from pipeline.jobs.cards import job as cards
from pipeline.metrics import MetricsPublisher
from pipeline.progress import ProgressTotals
from streamsim.loadtest.config import LoadTestConfig
from streamsim.loadtest.run import run_loadtest
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.integration

SCENARIO = REPO_ROOT / "config/scenarios/cards.yaml"


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The shipped card scenario with 20x the impossible-travel and card-testing rates: the ~9,000
    records a run sends hold a few incidents that alert, not one whose loss fails the test."""
    data = yaml.safe_load(SCENARIO.read_text())
    for kind in ("impossible_travel", "card_testing"):
        data["domain"]["fraud"][kind]["rate_per_1k_card_hours"] *= 20
    path = tmp_path_factory.mktemp("lt-scenario") / "cards.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@dataclass
class RunningJob:
    name: str  # the job name its progress records carry (unique to this test)
    topic: str
    alerts_topic: str
    queries: list[Any]

    def assert_running(self) -> None:
        for query in self.queries:
            assert query.exception() is None and query.isActive, query.name


@pytest.fixture  # one per test: a run's stream starts where the scenario starts, so a job
# whose watermark an earlier run moved past it would drop it all as late
def job(
    kafka_stack: StackConfig, spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningJob]:
    """cards on private topics and checkpoints, publishing its progress to `metrics`."""
    tag = uuid.uuid4().hex[:8]
    tmp = tmp_path_factory.mktemp("lt-job")
    dirs = kafka_stack.dirs.model_copy(update={"checkpoints": tmp / "cp", "lake": tmp / "lake"})
    stack = kafka_stack.model_copy(update={"dirs": dirs})
    cfg = PipelineConfig.model_validate(
        {
            "job": "cards",
            "input_topics": [f"lt.cards-{tag}"],
            "output_topic": f"lt.alerts-{tag}",
            "deadletter_topic": f"lt.deadletter-{tag}",
            "watermark": "2 minutes",  # terminal clocks differ by up to 2 min: none is late
            "trigger": {"mode": "microbatch", "interval": "0 seconds"},
            "cards": {
                "features_topic": f"lt.features-{tag}",
                "feature_windows": [{"length": "1 minute"}],
                "features_trigger": {"mode": "microbatch", "interval": "2 seconds"},
                "deadletter_trigger": {"mode": "microbatch", "interval": "2 seconds"},
                # The ~7 min of event time 9,000 records span close 5-minute velocity
                # windows (the card-testing bursts) up to ~5 min; 10-minute ones would not.
                "velocity": {"window_s": 300},
                "profiles_topic": None,  # the load is transactions only
            },
        }
    )
    ensure_topics(stack, cfg.input_topics, partitions=2)  # as `pipeline run` does
    name = f"cards-{tag}"
    metrics = MetricsPublisher(stack, name, "microbatch")
    listener = ProgressTotals(metrics)
    spark.streams.addListener(listener)
    queries = cards.start(spark, stack, cfg)
    try:
        yield RunningJob(name, cfg.input_topics[0], cfg.output_topic, queries)
    finally:
        for query in queries:
            query.stop()
        spark.streams.removeListener(listener)
        metrics.close()


def kafka_target(job: RunningJob, scenario: str, seed: int) -> dict[str, Any]:
    return {
        "type": "kafka",
        "topic": job.topic,
        "source": {"type": "scenario", "file": scenario, "seed": seed},
        "job": job.name,
        "alerts_topic": job.alerts_topic,
        "lag": {"sample_s": 0.5, "drain_s": 300, "recovered_at": 0, "alerts_settle_s": 15},
    }


def assert_measured(report: dict[str, Any]) -> None:
    """Lag sampled from the job's progress and alerts traced back to planted records."""
    assert report["job"].startswith("cards-")
    assert report["lag_samples"] > 0
    assert report["lag"]["max"] > 0  # records were ahead of the job at some sample
    assert report["lag"]["recovery_s"] is not None  # and it caught up to 0 before the drain
    assert report["payload_kinds"]["planted"] > 0
    assert report["alerts_traced"] > 0
    e2e = report["end_to_end_ms"]
    assert 0 < e2e["p50"] <= e2e["p99"] < 300_000


@pytest.mark.timeout(900)
def test_kafka_target_measures_the_real_jobs_lag_and_produce_to_alert_latency(
    kafka_stack: StackConfig, job: RunningJob, scenario: str, tmp_path: Path
) -> None:
    cfg = LoadTestConfig.model_validate(
        {
            "kind": "loadtest",
            "target": kafka_target(job, scenario, seed=11),
            "load": {"type": "constant", "rate": 1000},
            "warmup_s": 1,
            "duration_s": 8,
            "slo": {"p99_ms": 10_000, "lag_recovery_s": 300, "e2e_p99_ms": 300_000},
        }
    )
    report = run_loadtest(cfg, kafka_stack, "real-job", tmp_path / "out")
    job.assert_running()
    assert report["errors"] == 0 and report["requests"] > 7000
    assert_measured(report)
    assert report["slo"]["lag_recovery_s"]["ok"] is True
    assert report["slo"]["e2e_p99_ms"]["measured"] == report["end_to_end_ms"]["p99"]
    assert (tmp_path / "out" / "lag_over_time.html").exists()


@pytest.mark.timeout(900)
def test_scenario_target_measures_both_paths_against_the_real_job(
    kafka_stack: StackConfig, job: RunningJob, endpoint: str, scenario: str, tmp_path: Path
) -> None:
    cfg = LoadTestConfig.model_validate(
        {
            "kind": "loadtest",
            "target": {
                "type": "scenario",
                "http": {
                    "target": {"url": endpoint},
                    "load": {"type": "constant", "rate": 100},
                    "payload": {"cards": 500, "cities": 20, "merchants": 50},
                    "client": {"connections": 8},
                    "slo": {"p99_ms": 5000},
                },
                "kafka": {
                    "target": kafka_target(job, scenario, seed=12),
                    "load": {"type": "constant", "rate": 1000},
                    "slo": {"e2e_p99_ms": 1},  # impossible: the Kafka path fails alone
                },
            },
            "warmup_s": 1,
            "duration_s": 8,
        }
    )
    report = run_loadtest(cfg, kafka_stack, "pos", tmp_path / "out")
    job.assert_running()
    http, kafka = report["paths"]["http"], report["paths"]["kafka"]
    assert http["ok"] is True and http["requests"] > 700
    assert_measured(kafka)
    assert kafka["slo"]["e2e_p99_ms"]["ok"] is False
    assert kafka["ok"] is False and report["ok"] is False
