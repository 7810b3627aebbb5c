"""Small tagged distributions for config: sampled in bulk, with exact quantiles for verification.

In YAML a distribution is a mapping with a `type`, or a bare number meaning a constant:

    delay_s: {type: lognormal, median: 0.08, sigma: 0.6}
    offset_s: 0
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BeforeValidator, Field, model_validator

from core.config.base import Settings
from simulators.tagged import require_tag, untagged

_STD_NORMAL = NormalDist()


class _Distribution(Settings):
    """A distribution with a vectorised `sample` and an exact inverse CDF (`ppf`)."""

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        raise NotImplementedError

    def ppf(self, q: float) -> float:
        """The q-quantile, 0 <= q <= 1 (may be +-inf at the ends)."""
        raise NotImplementedError

    @property
    def is_constant(self) -> bool:
        return False

    def clipped_quantile(self, q: float, low: float, high: float) -> float:
        """The q-quantile of min(max(X, low), high): clipping is monotone, so it commutes."""
        return min(max(self.ppf(min(max(q, 0.0), 1.0)), low), high)

    def clipped_mean(self, low: float, high: float, points: int = 4000) -> float:
        """E[min(max(X, low), high)] by the midpoint rule over the quantile function."""
        qs = (np.arange(points) + 0.5) / points
        return float(np.mean([self.clipped_quantile(float(q), low, high) for q in qs]))


class Constant(_Distribution):
    type: Literal["constant"] = "constant"
    value: float = Field(0.0, description="The value every sample takes.")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.value, dtype=np.float64)

    def ppf(self, q: float) -> float:
        return self.value

    @property
    def is_constant(self) -> bool:
        return True


class Uniform(_Distribution):
    type: Literal["uniform"] = "uniform"
    low: float = Field(0.0, description="Smallest value.")
    high: float = Field(1.0, description="Largest value; must be >= low.")

    @model_validator(mode="after")
    def _ordered(self) -> Uniform:
        if self.high < self.low:
            raise ValueError(f"high ({self.high}) must be >= low ({self.low})")
        return self

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.uniform(self.low, self.high, n)

    def ppf(self, q: float) -> float:
        return self.low + q * (self.high - self.low)

    @property
    def is_constant(self) -> bool:
        return self.high == self.low


class Normal(_Distribution):
    type: Literal["normal"] = "normal"
    mean: float = Field(0.0, description="Mean.")
    std: float = Field(1.0, ge=0, description="Standard deviation (>= 0).")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.normal(self.mean, self.std, n)

    def ppf(self, q: float) -> float:
        if self.std == 0:
            return self.mean
        if q <= 0 or q >= 1:
            return -math.inf if q <= 0 else math.inf
        return self.mean + self.std * _STD_NORMAL.inv_cdf(q)

    @property
    def is_constant(self) -> bool:
        return self.std == 0


class LogNormal(_Distribution):
    """exp(N(ln median, sigma)): positive and right-skewed, like network delays."""

    type: Literal["lognormal"] = "lognormal"
    median: float = Field(0.05, gt=0, description="Median (> 0); exp(mu) of the normal.")
    sigma: float = Field(0.5, ge=0, description="Shape: std of the underlying normal (>= 0).")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.lognormal(math.log(self.median), self.sigma, n)

    def ppf(self, q: float) -> float:
        if self.sigma == 0:
            return self.median
        if q <= 0 or q >= 1:
            return 0.0 if q <= 0 else math.inf
        return self.median * math.exp(self.sigma * _STD_NORMAL.inv_cdf(q))

    @property
    def is_constant(self) -> bool:
        return self.sigma == 0


class Exponential(_Distribution):
    type: Literal["exponential"] = "exponential"
    mean: float = Field(1.0, gt=0, description="Mean (> 0).")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.exponential(self.mean, n)

    def ppf(self, q: float) -> float:
        return math.inf if q >= 1 else -self.mean * math.log1p(-q)


def _number_is_constant(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"type": "constant", "value": value}
    return value


_TAGS = ("constant", "uniform", "normal", "lognormal", "exponential")

Distribution = Annotated[
    Constant | Uniform | Normal | LogNormal | Exponential,
    Field(discriminator="type"),
    untagged(_TAGS),
    BeforeValidator(require_tag(_TAGS)),
    BeforeValidator(_number_is_constant),
]
"""Any of the tagged distributions; a bare number is a constant."""


def sample_per_group(rng: np.random.Generator, dists: list[Any], group: np.ndarray) -> np.ndarray:
    """One draw per element, from `dists[group[i]]`; groups are drawn in index order."""
    out = np.empty(group.shape[0], dtype=np.float64)
    for g, dist in enumerate(dists):
        mask = group == g
        count = int(mask.sum())
        if count:
            out[mask] = dist.sample(rng, count)
    return out
