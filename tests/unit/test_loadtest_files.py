"""Every load-test file under config/loadtests/ loads, and the files issue 16 asks for are there:
the endpoint at 2,000 req/s (p99 <= 3 ms), the knee step test, a Kafka ingest test per Spark job
into the topic that job reads, and a 10x spike for 30 s with lag and recovery SLOs."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import load_model
from pipeline.config import PipelineConfig
from scenarios.catalog import ScenarioConfig
from streamsim.config.kinds import load_file
from streamsim.loadtest.config import (
    HttpTarget,
    KafkaTarget,
    LoadTestConfig,
    ScenarioSource,
    ScenarioTarget,
)
from tests.conftest import REPO_ROOT

FILES = sorted((REPO_ROOT / "config/loadtests").glob("*.yaml"))


def load(name: str) -> LoadTestConfig:
    kind, model = load_file(REPO_ROOT / "config/loadtests" / f"{name}.yaml")
    assert kind == "loadtest" and isinstance(model, LoadTestConfig)
    return model


def kafka_targets(cfg: LoadTestConfig) -> list[KafkaTarget]:
    target = cfg.target
    if isinstance(target, ScenarioTarget):
        return [target.kafka.target]
    return [target] if isinstance(target, KafkaTarget) else []


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_file_loads_and_its_kafka_paths_feed_the_named_job(path: Path) -> None:
    cfg = load(path.stem)
    assert cfg.name in (None, path.stem)
    for target in kafka_targets(cfg):
        assert isinstance(target.source, ScenarioSource)
        scenario = load_model(ScenarioConfig, REPO_ROOT / target.source.file)
        if target.job is not None:
            pipeline = load_model(
                PipelineConfig, REPO_ROOT / "config/pipelines" / f"{target.job}.yaml"
            )
            topic = target.topic or scenario.domain.topic
            assert topic in pipeline.input_topics, f"{target.job} does not read {topic}"


def test_the_endpoint_file_is_2000_per_s_at_p99_3_ms() -> None:
    cfg = load("endpoint_2000")
    assert isinstance(cfg.target, HttpTarget)
    assert cfg.load.type == "constant" and cfg.load.rate == 2000
    assert cfg.slo.p99_ms == 3


def test_the_knee_file_steps_through_2000_per_s_at_p99_3_ms() -> None:
    cfg = load("endpoint_knee")
    assert cfg.load.type == "step" and cfg.slo.p99_ms == 3
    rates = [s.rate for s in cfg.load.steps]
    assert rates == sorted(rates) and rates[0] < 2000 < rates[-1]


def test_each_spark_job_has_a_kafka_ingest_file_with_bounded_lag() -> None:
    jobs = {}
    for path in FILES:
        cfg = load(path.stem)
        target = cfg.target
        if isinstance(target, KafkaTarget) and cfg.load.type == "constant" and target.job:
            jobs[target.job] = cfg
    assert set(jobs) >= {"sensors", "cards", "vehicles"}
    for cfg in jobs.values():  # recovery needs the load to stop: the spike file's part
        assert cfg.slo.lag_max is not None and cfg.slo.lag_recovery_s is None


def test_the_spike_file_is_10x_for_30_s_and_recovers_within_60_s() -> None:
    cfg = load("kafka_spike")
    assert cfg.load.type == "spike"
    assert cfg.load.spike_rate == 10 * cfg.load.rate and cfg.load.for_s == 30
    # recovery is measured under the base load: 60 s of it follow the spike
    assert cfg.load.at_s + cfg.load.for_s + 60 <= cfg.total_s
    (target,) = kafka_targets(cfg)
    assert target.job is not None and target.lag.drain_s >= 60
    assert target.lag.recovered_at is not None  # back in the steady range, not at 0
    assert cfg.slo.lag_recovery_s == 60
