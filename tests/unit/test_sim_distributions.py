"""Distributions: vectorised samples follow the exact quantile function; config shorthands."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import TypeAdapter, ValidationError

from simulators.distributions import Distribution, sample_per_group

ADAPTER: TypeAdapter = TypeAdapter(Distribution)

CASES = [
    {"type": "constant", "value": 2.5},
    {"type": "uniform", "low": -3, "high": 7},
    {"type": "normal", "mean": 1.0, "std": 2.0},
    {"type": "lognormal", "median": 0.2, "sigma": 0.7},
    {"type": "exponential", "mean": 3.0},
]


@pytest.mark.parametrize("spec", CASES, ids=lambda s: s["type"])
def test_samples_match_the_quantile_function(spec: dict) -> None:
    dist = ADAPTER.validate_python(spec)
    sample = dist.sample(np.random.default_rng(1), 200_000)
    for q in (0.05, 0.25, 0.5, 0.75, 0.95):
        empirical = float(np.quantile(sample, q))
        band = (dist.ppf(max(q - 0.005, 0)), dist.ppf(min(q + 0.005, 1)))
        assert band[0] - 1e-9 <= empirical <= band[1] + 1e-9, (q, empirical, band)


def test_a_bare_number_is_a_constant() -> None:
    dist = ADAPTER.validate_python(0.25)
    assert dist.type == "constant"
    assert dist.sample(np.random.default_rng(0), 3).tolist() == [0.25, 0.25, 0.25]


def test_clipped_statistics() -> None:
    exp = ADAPTER.validate_python({"type": "exponential", "mean": 2.0})
    assert exp.clipped_mean(0, math.inf) == pytest.approx(2.0, rel=0.01)
    normal = ADAPTER.validate_python({"type": "normal", "mean": 0, "std": 1})
    # E[max(Z, 0)] = 1/sqrt(2 pi)
    assert normal.clipped_mean(0, math.inf) == pytest.approx(1 / math.sqrt(2 * math.pi), rel=0.01)
    assert normal.clipped_quantile(0.01, 0, 5) == 0.0


def test_invalid_parameters_are_rejected() -> None:
    with pytest.raises(ValidationError, match="high"):
        ADAPTER.validate_python({"type": "uniform", "low": 2, "high": 1})
    with pytest.raises(ValidationError, match="greater than 0"):
        ADAPTER.validate_python({"type": "lognormal", "median": 0})
    with pytest.raises(ValidationError, match="needs a 'type'"):
        ADAPTER.validate_python({"mean": 1})


def test_sample_per_group_uses_each_groups_distribution() -> None:
    dists = [ADAPTER.validate_python(1.0), ADAPTER.validate_python(5.0)]
    group = np.array([0, 1, 1, 0])
    assert sample_per_group(np.random.default_rng(0), dists, group).tolist() == [1, 5, 5, 1]
