"""Load-test arrival shapes: exact rate integrals, send-time schedules, validation errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from core.config import ConfigError
from core.config.loader import validate
from streamsim.loadtest.config import LoadTestConfig
from streamsim.loadtest.shapes import (
    ConstantLoad,
    RampLoad,
    SineLoad,
    SpikeLoad,
    Step,
    StepLoad,
    expected_requests,
    send_times,
)

SHAPES = [
    ConstantLoad(rate=250),
    RampLoad(from_rate=10, to_rate=500, start_s=3, over_s=10),
    StepLoad(steps=[Step(at_s=0, rate=100), Step(at_s=4, rate=0), Step(at_s=9, rate=800)]),
    SineLoad(rate=300, amplitude=300, period_s=7),
    SpikeLoad(rate=50, spike_rate=900, at_s=5, for_s=2.5),
]


def load(data: dict[str, Any]) -> LoadTestConfig:
    return validate(LoadTestConfig, data, "lt.yaml")


def error_of(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        load(data)
    return str(info.value)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.type)
def test_integral_is_the_area_under_the_rate(shape: Any) -> None:
    t = np.linspace(0, 20, 400_001)
    numeric = np.concatenate(
        [[0.0], np.cumsum((shape.rate_at(t[1:]) + shape.rate_at(t[:-1])) / 2 * np.diff(t))]
    )
    exact = shape.integral(t)
    assert np.max(np.abs(exact - numeric)) < 0.05  # trapezoid error at the jumps only
    assert exact[0] == 0


def test_closed_forms() -> None:
    assert expected_requests(ConstantLoad(rate=250), 8) == pytest.approx(2000)
    # 3 s at 10/s, a 10 s ramp 10 -> 500 (mean 255), then 2 s at 500.
    assert expected_requests(SHAPES[1], 15) == pytest.approx(30 + 2550 + 1000)
    assert expected_requests(SHAPES[2], 12) == pytest.approx(400 + 0 + 2400)
    assert expected_requests(SHAPES[3], 7) == pytest.approx(2100)  # whole periods: the mean
    assert expected_requests(SHAPES[4], 10) == pytest.approx(50 * 7.5 + 900 * 2.5)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.type)
def test_uniform_schedule_follows_the_integral_in_every_interval(shape: Any) -> None:
    seconds = 15.0
    times = send_times(shape, seconds, "uniform", np.random.default_rng(0))
    assert np.all(np.diff(times) >= 0) and times[0] >= 0 and times[-1] < seconds
    assert len(times) == pytest.approx(expected_requests(shape, seconds), abs=1)
    for a, b in [(0, 1), (2.5, 4), (4, 9), (5, 7.5), (9, 15), (0.3, 14.2)]:
        inside = np.count_nonzero((times >= a) & (times < b))
        expected = float(shape.integral(np.array([b]))[0] - shape.integral(np.array([a]))[0])
        assert inside == pytest.approx(expected, abs=1.01), (a, b)


def test_step_with_a_pause_sends_nothing_during_it() -> None:
    times = send_times(SHAPES[2], 12, "poisson", np.random.default_rng(3))
    assert not np.any((times > 4.0001) & (times < 8.9999))


def test_poisson_schedule_count_and_gaps() -> None:
    shape = ConstantLoad(rate=2000)
    times = send_times(shape, 10, "poisson", np.random.default_rng(7))
    assert abs(len(times) - 20_000) < 5 * np.sqrt(20_000)
    gaps = np.diff(times)
    assert gaps.mean() == pytest.approx(1 / 2000, rel=0.05)
    assert gaps.std() == pytest.approx(1 / 2000, rel=0.1)  # exponential: std == mean
    again = send_times(shape, 10, "poisson", np.random.default_rng(7))
    assert np.array_equal(times, again)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"load": {"rate": 5}}, "key 'load'"),
        ({"load": {"type": "square"}}, "key 'load'"),
        ({"load": {"type": "constant", "rate": 0}}, "key 'load.rate'"),
        ({"load": {"type": "ramp", "to_rate": 5}}, "key 'load.over_s' is required"),
        (
            {"load": {"type": "sine", "rate": 10, "amplitude": 11}},
            "amplitude (11.0) must be <= rate",
        ),
        ({"load": {"type": "step", "steps": [{"at_s": 1, "rate": 5}]}}, "steps[0].at_s must be 0"),
        (
            {"load": {"type": "step", "steps": [{"at_s": 0, "rate": 5}, {"at_s": 0, "rate": 6}]}},
            "steps[1].at_s (0.0) must be after",
        ),
        (
            {"load": {"type": "step", "steps": [{"at_s": 0, "rate": -1}]}},
            "key 'load.steps[0].rate'",
        ),
        ({"load": {"type": "spike", "rate": 1, "spike_rate": 2, "at_s": 0}}, "key 'load.for_s'"),
        ({"load": {"type": "constant", "rate": 1e6}, "duration_s": 3600}, "lower the rate"),
        ({"load": {"type": "constant", "rate": 10, "burst": 3}}, "key 'load.burst' is not a known"),
        ({"duration_s": 0}, "key 'duration_s'"),
        ({"warmup_s": -1}, "key 'warmup_s'"),
        ({"arrivals": "bursty"}, "key 'arrivals'"),
    ],
)
def test_validation_errors_name_the_key(data: dict[str, Any], expected: str) -> None:
    assert expected in error_of(data)


def test_targets_validate() -> None:
    assert "key 'target.source'" in error_of({"target": {"type": "kafka"}})
    assert "key 'target.source'" in error_of(
        {"target": {"type": "kafka", "source": {"type": "ftp"}}}
    )
    assert "key 'target.lag.sample_s'" in error_of(
        {"target": {"type": "kafka", "source": {"type": "payload"}, "lag": {"sample_s": 0}}}
    )
    assert "key 'target.kafka'" in error_of({"target": {"type": "scenario", "http": {}}})
    kafka = load({"target": {"type": "kafka", "source": {"type": "scenario", "file": "x.yaml"}}})
    assert kafka.target.type == "kafka" and kafka.target.job is None
    assert "key 'target'" in error_of({"target": {"type": "ftp"}})
    assert "https is not supported" in error_of({"target": {"url": "https://x:1"}})
    assert "path goes in target.path" in error_of({"target": {"url": "http://x:1/v1"}})
    assert "key 'target.timeout_s'" in error_of({"target": {"timeout_s": 0}})
    cfg = load({"target": {"url": "http://127.0.0.1:9000/"}})
    assert cfg.target.type == "http" and cfg.target.url == "http://127.0.0.1:9000"


def test_other_sections_validate() -> None:
    assert "must be <= 1" in error_of(
        {"payload": {"invalid_share": 0.6, "unknown_card_share": 0.5}}
    )
    assert "key 'payload.card_testing_burst'" in error_of({"payload": {"card_testing_burst": 1}})
    assert "max_in_flight (4) must be >= connections (8)" in error_of(
        {"client": {"connections": 8, "max_in_flight": 4}}
    )
    assert "key 'slo.p99_ms'" in error_of({"slo": {"p99_ms": 0}})
    assert "key 'slo.error_rate'" in error_of({"slo": {"error_rate": 2}})


def test_shipped_config_is_valid() -> None:
    from pathlib import Path

    from streamsim.config.kinds import load_file

    kind, model = load_file(
        Path(__file__).resolve().parents[2] / "config/loadtests/fraud_endpoint.yaml"
    )
    assert kind == "loadtest"
    assert isinstance(model, LoadTestConfig)
    assert model.load.type == "constant" and model.slo.p99_ms == 10
