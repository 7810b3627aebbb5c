"""Arrival-rate shapes of a load test, and the intended send times they give.

A shape is a small tagged model (`type: constant | ramp | step | sine | spike`) with the request
rate λ(t) in requests/s at `t` seconds after the run starts (warm-up included), and its exact
integral Λ(t) = ∫₀ᵗ λ, the expected number of requests sent by `t`.

`send_times(shape, seconds, arrivals, rng)` precomputes every intended send time of a run: the
points u = Λ(t) are spaced one apart (`uniform`: u = 0.5, 1.5, ...) or by unit exponential gaps
(`poisson`), and each is mapped back to time through Λ⁻¹. So the number of requests in any
interval [a, b) is Λ(b) - Λ(a) (± 1 for `uniform`, in expectation for `poisson`), whatever the
shape.

    load: {type: ramp, from_rate: 100, to_rate: 1000, over_s: 60}
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
from pydantic import BeforeValidator, Field, model_validator

from core.config.base import Settings
from simulators.tagged import require_tag, untagged

Arrivals = Literal["poisson", "uniform"]
#: Intended send times are kept per request; bound a run's size so a typo cannot eat the RAM.
MAX_REQUESTS = 5_000_000
#: Λ⁻¹ is interpolated on a grid at most this fine (and with every breakpoint of the shape).
_GRID_POINTS = 1_000_000


class _Shape(Settings):
    def rate_at(self, t: np.ndarray) -> np.ndarray:
        """λ(t), requests/s."""
        raise NotImplementedError

    def integral(self, t: np.ndarray) -> np.ndarray:
        """Λ(t) = ∫₀ᵗ λ(s) ds: the expected requests sent by `t`."""
        raise NotImplementedError

    def breakpoints(self) -> list[float]:
        """Where λ changes slope or jumps (Λ⁻¹ is exact between them for piecewise-linear Λ)."""
        return []

    def mean_rate(self, seconds: float) -> float:
        return float(self.integral(np.array([seconds]))[0]) / seconds


def _overlap(t: np.ndarray, start: float, end: float) -> np.ndarray:
    """Length of [0, t] ∩ [start, end]."""
    return np.clip(t, start, end) - start


class ConstantLoad(_Shape):
    """The same rate throughout."""

    type: Literal["constant"] = "constant"
    rate: float = Field(100.0, gt=0, description="Requests/s.")

    def rate_at(self, t: np.ndarray) -> np.ndarray:
        return np.full_like(t, self.rate, dtype=np.float64)

    def integral(self, t: np.ndarray) -> np.ndarray:
        return self.rate * np.asarray(t, dtype=np.float64)


class RampLoad(_Shape):
    """`from_rate` until `start_s`, then linearly to `to_rate` over `over_s`, then `to_rate`."""

    type: Literal["ramp"] = "ramp"
    from_rate: float = Field(0.0, ge=0, description="Requests/s before and at the ramp start.")
    to_rate: float = Field(description="Requests/s at the end of the ramp and after it.", gt=0)
    start_s: float = Field(0.0, ge=0, description="Ramp start, seconds after the run starts.")
    over_s: float = Field(description="Ramp length, seconds.", gt=0)

    def rate_at(self, t: np.ndarray) -> np.ndarray:
        frac = np.clip((np.asarray(t, dtype=np.float64) - self.start_s) / self.over_s, 0, 1)
        return self.from_rate + (self.to_rate - self.from_rate) * frac

    def integral(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        s, o = self.start_s, self.over_s
        ramp_t = _overlap(t, s, s + o)  # time spent on the ramp so far
        slope = (self.to_rate - self.from_rate) / o
        return (
            self.from_rate * np.minimum(t, s)
            + self.from_rate * ramp_t
            + slope * ramp_t**2 / 2
            + self.to_rate * np.maximum(t - s - o, 0)
        )

    def breakpoints(self) -> list[float]:
        return [self.start_s, self.start_s + self.over_s]


class Step(Settings):
    at_s: float = Field(ge=0, description="When this rate starts, seconds after the run starts.")
    rate: float = Field(ge=0, description="Requests/s from `at_s` until the next step.")


class StepLoad(_Shape):
    """A rate that jumps at given times; the last rate holds to the end."""

    type: Literal["step"] = "step"
    steps: list[Step] = Field(
        min_length=1,
        description="Steps in time order; the first starts at 0 (at_s: 0), and at least one "
        "rate is > 0.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> StepLoad:
        if self.steps[0].at_s != 0:
            raise ValueError(f"steps[0].at_s must be 0 (got {self.steps[0].at_s})")
        for i in range(1, len(self.steps)):
            if self.steps[i].at_s <= self.steps[i - 1].at_s:
                raise ValueError(
                    f"steps[{i}].at_s ({self.steps[i].at_s}) must be after "
                    f"steps[{i - 1}].at_s ({self.steps[i - 1].at_s})"
                )
        if all(step.rate == 0 for step in self.steps):
            raise ValueError("at least one step needs a rate > 0")
        return self

    def _ends(self) -> list[float]:
        return [s.at_s for s in self.steps[1:]] + [math.inf]

    def rate_at(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        starts = np.array([s.at_s for s in self.steps])
        rates = np.array([s.rate for s in self.steps])
        return rates[np.searchsorted(starts, t, side="right") - 1]

    def integral(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        total = np.zeros_like(t)
        for step, end in zip(self.steps, self._ends(), strict=True):
            total += step.rate * _overlap(t, step.at_s, end)
        return total

    def breakpoints(self) -> list[float]:
        return [s.at_s for s in self.steps]


class SineLoad(_Shape):
    """rate + amplitude · sin(2π t / period_s): a daily cycle, compressed."""

    type: Literal["sine"] = "sine"
    rate: float = Field(description="Mean requests/s.", gt=0)
    amplitude: float = Field(description="Swing around the mean, requests/s; at most `rate`.", ge=0)
    period_s: float = Field(60.0, gt=0, description="Period, seconds.")

    @model_validator(mode="after")
    def _non_negative(self) -> SineLoad:
        if self.amplitude > self.rate:
            raise ValueError(
                f"amplitude ({self.amplitude}) must be <= rate ({self.rate}): a rate cannot "
                "go below 0"
            )
        return self

    def rate_at(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        return self.rate + self.amplitude * np.sin(2 * np.pi * t / self.period_s)

    def integral(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        w = 2 * np.pi / self.period_s
        return self.rate * t + self.amplitude / w * (1 - np.cos(w * t))


class SpikeLoad(_Shape):
    """`rate`, except `spike_rate` from `at_s` for `for_s` seconds."""

    type: Literal["spike"] = "spike"
    rate: float = Field(description="Requests/s outside the spike.", gt=0)
    spike_rate: float = Field(description="Requests/s during the spike.", gt=0)
    at_s: float = Field(description="Spike start, seconds after the run starts.", ge=0)
    for_s: float = Field(description="Spike length, seconds.", gt=0)

    def rate_at(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        inside = (t >= self.at_s) & (t < self.at_s + self.for_s)
        return np.where(inside, self.spike_rate, self.rate)

    def integral(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        extra = (self.spike_rate - self.rate) * _overlap(t, self.at_s, self.at_s + self.for_s)
        return self.rate * t + extra

    def breakpoints(self) -> list[float]:
        return [self.at_s, self.at_s + self.for_s]


SHAPE_TAGS = ("constant", "ramp", "step", "sine", "spike")

LoadShape = Annotated[
    ConstantLoad | RampLoad | StepLoad | SineLoad | SpikeLoad,
    Field(discriminator="type"),
    untagged(SHAPE_TAGS),
    BeforeValidator(require_tag(SHAPE_TAGS)),
]
"""Any of the shapes, picked by `type`."""


def expected_requests(shape: _Shape, seconds: float) -> float:
    return float(shape.integral(np.array([seconds]))[0])


def send_times(
    shape: _Shape, seconds: float, arrivals: Arrivals, rng: np.random.Generator
) -> np.ndarray:
    """Every intended send time in [0, seconds), ascending, seconds after the run starts."""
    total = expected_requests(shape, seconds)
    if total > MAX_REQUESTS:
        raise ValueError(
            f"{total:,.0f} requests expected; a run holds at most {MAX_REQUESTS:,}: lower the "
            "rate or the duration"
        )
    if arrivals == "uniform":
        points = np.arange(0.5, total, 1.0)
    else:
        gaps = rng.exponential(1.0, int(total + 10 * math.sqrt(total) + 20))
        points = np.cumsum(gaps)
        while points[-1] < total:  # vanishingly rare; keep drawing until past the end
            more = np.cumsum(rng.exponential(1.0, len(gaps))) + points[-1]
            points = np.concatenate([points, more])
        points = points[points < total]
    grid = np.union1d(
        np.linspace(0.0, seconds, _GRID_POINTS + 1),
        [b for b in shape.breakpoints() if 0 < b < seconds],
    )
    cumulative = shape.integral(grid)
    times = np.interp(points, cumulative, grid)
    return np.minimum(times, np.nextafter(seconds, 0))
