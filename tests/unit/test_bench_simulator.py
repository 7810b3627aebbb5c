"""bench simulator: ProducerPerformance gets the simulator's producer settings."""

from __future__ import annotations

from core.config import StackConfig
from core.kafka import producer_config
from streamsim.bench.producer_perf import java_producer_props
from streamsim.bench.simulator import SHARED_SETTINGS


def test_producer_performance_runs_with_the_simulators_producer_settings() -> None:
    producer = producer_config(StackConfig())
    props = dict(p.split("=", 1) for p in java_producer_props(producer))
    assert set(SHARED_SETTINGS) <= set(props)
    for key in SHARED_SETTINGS:
        assert props[key] == str(producer[key]).lower()
