"""Which sliders a scenario gets, and how their values become a run request.

`knobs_for(config, tunable)` reads a resolved scenario config and the keys its run requests
may set (both from GET /v1/scenarios: the API's allow-list, `runs.tunable`) and
returns a knob for each tunable key it can show, and for no other key:
- rate: entities, speed, a cap on events/s, the simulated duration;
- fraud or fault mix: every tunable number under `domain`, each entry of a rate keyed by type
  included (`faults.rate_per_hour.overheating`; an entry the file leaves out is 0) and every
  `mix` weight (`faults.mix.spike`); the domain's `delivery` (kafka or http: POS mode through
  the endpoint) when it has one;
- clock skew: offset and drift spread, jump probability;
- lateness: network delay median, outages per hour and their length, duplicates, drops.

`run_request(config, knobs, values)` turns the slider values into `(speed, duration_s,
overrides)`, with only the knobs moved off the file's value. Clock and delivery knobs are set
at the top level and on every entity class (a class's own keys win over the top level, so a
slider that should move the whole fleet must reach the classes too).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Group = Literal["rate", "mix", "skew", "lateness"]
Scope = Literal["run", "top", "fleet"]  # a request field; a top-level key; top + every class

GROUP_TITLES: dict[Group, str] = {
    "rate": "Rate",
    "mix": "Fraud / fault mix",
    "skew": "Clock skew",
    "lateness": "Lateness and delivery faults",
}
NO_CAP = "no cap"


@dataclass(frozen=True)
class Knob:
    key: str  # unique; also the widget key
    label: str
    group: Group
    scope: Scope
    path: tuple[str, ...]  # where the value goes (for scope run: the request field)
    default: Any
    kind: Literal["slider", "select"] = "slider"
    low: float = 0.0
    high: float = 1.0
    step: float | None = None
    options: Sequence[Any] = field(default_factory=tuple)
    help: str = ""
    encode: str = "value"  # how the value is written: value, normal_std, lognormal_median, ...

    def to_override(self, value: Any, current: Any) -> Any:
        """The override value at `path` for a slider value (`current`: the file's value)."""
        if self.encode == "normal_std":
            return {"type": "normal", "mean": _mean_of(current), "std": float(value)}
        if self.encode == "lognormal_median":
            if isinstance(current, Mapping) and current.get("type") == "lognormal":
                return {"type": "lognormal", "median": float(value), "sigma": current["sigma"]}
            return {"type": "lognormal", "median": float(value), "sigma": 0.6}
        if self.encode == "exponential_mean":
            return {"type": "exponential", "mean": float(value)}
        if self.encode == "cap":
            return None if value == NO_CAP else float(value)
        return value


def get_path(data: Mapping[str, Any], path: Sequence[str]) -> Any:
    node: Any = data
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def set_path(data: dict[str, Any], path: Sequence[str], value: Any) -> None:
    node = data
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value


# -- distributions as one number -------------------------------------------------------------


def spread_of(dist: Any) -> float:
    """A distribution's standard deviation (0 for a constant)."""
    if not isinstance(dist, Mapping):
        return 0.0
    kind = dist.get("type")
    if kind == "normal":
        return float(dist.get("std", 0.0))
    if kind == "uniform":
        return (float(dist["high"]) - float(dist["low"])) / math.sqrt(12)
    if kind == "exponential":
        return float(dist.get("mean", 0.0))
    if kind == "lognormal":
        m, s = float(dist["median"]), float(dist["sigma"])
        return m * math.sqrt((math.exp(s * s) - 1) * math.exp(s * s))
    return 0.0


def _mean_of(dist: Any) -> float:
    if not isinstance(dist, Mapping):
        return float(dist) if isinstance(dist, int | float) else 0.0
    kind = dist.get("type")
    if kind in ("normal", "exponential"):
        return float(dist.get("mean", 0.0))
    if kind == "uniform":
        return (float(dist["low"]) + float(dist["high"])) / 2
    if kind == "constant":
        return float(dist.get("value", 0.0))
    if kind == "lognormal":
        return float(dist["median"])
    return 0.0


def median_of(dist: Any) -> float:
    if isinstance(dist, Mapping) and dist.get("type") == "lognormal":
        return float(dist["median"])
    return _mean_of(dist)


# -- the catalogue ---------------------------------------------------------------------------


def _ladder(values: Sequence[float], default: float | None) -> list[Any]:
    """A sorted option list that contains the file's value."""
    out: set[float] = set(values)
    if default is not None:
        out.add(default)
    return sorted(out)


def _round(value: float) -> float:
    return float(f"{value:.4g}")


def knobs_for(config: Mapping[str, Any], tunable: Collection[str]) -> list[Knob]:
    """The knobs of the `tunable` keys (speed and duration are request fields: always)."""
    allowed = set(tunable)
    knobs: list[Knob] = []
    entities = int(config.get("entities", 1000))
    knobs.append(
        Knob(
            "entities",
            "Entities (cards, devices)",
            "rate",
            "top",
            ("entities",),
            entities,
            kind="select",
            options=_ladder([10, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000], entities),
            help="How many entities the scenario simulates; the event rate grows with it.",
        )
    )
    pacing = config.get("pacing") or {}
    speed = pacing.get("speed", 1.0)
    speeds: list[Any] = _ladder(
        [0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0], None if speed == "max" else float(speed)
    )
    knobs.append(
        Knob(
            "speed",
            "Speed (simulated s per wall s)",
            "rate",
            "run",
            ("speed",),
            speed if speed == "max" else float(speed),
            kind="select",
            options=[*speeds, "max"],
            help="Pacing only: the stream's content does not depend on it.",
        )
    )
    cap = pacing.get("max_rate")
    knobs.append(
        Knob(
            "max_rate",
            "Cap on events/s",
            "rate",
            "top",
            ("pacing", "max_rate"),
            NO_CAP if cap is None else float(cap),
            kind="select",
            options=[NO_CAP, *_ladder([10, 50, 100, 500, 1000, 5000, 10_000, 50_000], cap)],
            encode="cap",
        )
    )
    duration = float(config.get("duration_s", 600.0))
    knobs.append(
        Knob(
            "duration_s",
            "Duration (simulated s)",
            "rate",
            "run",
            ("duration_s",),
            duration,
            kind="select",
            options=_ladder([30, 60, 120, 300, 600, 1800, 3600, 6 * 3600, 86_400], duration),
        )
    )
    knobs = [k for k in knobs if k.scope == "run" or ".".join(k.path) in allowed]
    knobs.extend(_domain_knobs(config.get("domain") or {}, tunable))
    classes = [str(c.get("name", "default")) for c in config.get("classes") or []]
    knobs.extend(
        k
        for k in _fleet_knobs(config)
        if k.key in allowed and all(f"classes.{name}.{k.key}" in allowed for name in classes)
    )
    return knobs


def _domain_knobs(domain: Mapping[str, Any], tunable: Collection[str]) -> list[Knob]:
    """A knob per tunable number under `domain`, in the allow-list's order (a distribution,
    set whole, gets none)."""
    knobs: list[Knob] = []
    for key in tunable:
        if not key.startswith("domain."):
            continue
        here = tuple(key.split(".")[1:])
        value = get_path(domain, here)
        if here == ("delivery",) and value in ("kafka", "http"):
            knobs.append(
                Knob(
                    key,
                    "Send transactions to",
                    "mix",
                    "top",
                    ("domain", *here),
                    value,
                    kind="select",
                    options=["kafka", "http"],
                    help="kafka: straight to the topic. http: POS mode, each transaction asks "
                    "the fraud endpoint (its decisions then show on the map and in the alerts).",
                )
            )
            continue
        if value is None and isinstance(get_path(domain, here[:-1]), Mapping):
            value = 0.0  # an entry a rate keyed by type leaves out: none of that type
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if len(here) > 1 and here[-2] == "mix":
            weights = get_path(domain, here[:-1]) or {}
            top = max([float(v) for v in weights.values()] + [1.0])
            label, high, step = (
                f"{' / '.join(here[:-2]).replace('_', ' ') or 'mix'} / {here[-1]} weight",
                _round(2 * top),
                _round(2 * top / 40),
            )
        else:
            span = max(1.0, 10.0 * float(value))
            label, high, step = " / ".join(here).replace("_", " "), _round(span), _round(span / 100)
        knobs.append(
            Knob(key, label, "mix", "top", ("domain", *here), float(value), high=high, step=step)
        )
    return knobs


def _fleet_knobs(config: Mapping[str, Any]) -> list[Knob]:
    clock = config.get("clock") or {}
    delivery = config.get("delivery") or {}

    def number(path: tuple[str, ...], default: float = 0.0) -> float:
        value = get_path(config, path)
        return float(value) if isinstance(value, int | float) else default

    return [
        Knob(
            "clock.offset_s",
            "Clock offset spread (s, std)",
            "skew",
            "fleet",
            ("clock", "offset_s"),
            _round(spread_of(clock.get("offset_s"))),
            low=0.0,
            high=120.0,
            step=0.5,
            encode="normal_std",
            help="Each device's clock is off by a constant drawn from N(mean, this).",
        ),
        Knob(
            "clock.drift_ppm",
            "Clock drift spread (ppm, std)",
            "skew",
            "fleet",
            ("clock", "drift_ppm"),
            _round(spread_of(clock.get("drift_ppm"))),
            low=0.0,
            high=1000.0,
            step=5.0,
            encode="normal_std",
        ),
        Knob(
            "clock.jumps.probability",
            "Clock jump chance per reading",
            "skew",
            "fleet",
            ("clock", "jumps", "probability"),
            number(("clock", "jumps", "probability")),
            low=0.0,
            high=0.01,
            step=0.0001,
        ),
        Knob(
            "delivery.delay_s",
            "Network delay median (s)",
            "lateness",
            "fleet",
            ("delivery", "delay_s"),
            _round(median_of(delivery.get("delay_s"))),
            kind="select",
            options=_ladder(
                [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0],
                _round(median_of(delivery.get("delay_s"))),
            ),
            encode="lognormal_median",
        ),
        Knob(
            "delivery.outages.rate_per_hour",
            "Outages per device-hour",
            "lateness",
            "fleet",
            ("delivery", "outages", "rate_per_hour"),
            number(("delivery", "outages", "rate_per_hour")),
            low=0.0,
            high=20.0,
            step=0.1,
            help="Store-and-forward: readings wait during an outage and flush late.",
        ),
        Knob(
            "delivery.outages.duration_s",
            "Outage length (s, mean)",
            "lateness",
            "fleet",
            ("delivery", "outages", "duration_s"),
            _round(_mean_of(get_path(config, ("delivery", "outages", "duration_s")))),
            low=0.0,
            high=3600.0,
            step=10.0,
            encode="exponential_mean",
        ),
        Knob(
            "delivery.duplicates.probability",
            "Duplicate chance",
            "lateness",
            "fleet",
            ("delivery", "duplicates", "probability"),
            number(("delivery", "duplicates", "probability")),
            low=0.0,
            high=0.2,
            step=0.001,
        ),
        Knob(
            "delivery.drops.probability",
            "Drop chance",
            "lateness",
            "fleet",
            ("delivery", "drops", "probability"),
            number(("delivery", "drops", "probability")),
            low=0.0,
            high=0.2,
            step=0.001,
        ),
    ]


# -- values -> request -----------------------------------------------------------------------


@dataclass(frozen=True)
class RunRequest:
    speed: float | str | None
    duration_s: float | None
    overrides: dict[str, Any]


def changed(knob: Knob, value: Any) -> bool:
    if isinstance(value, float) and isinstance(knob.default, int | float):
        return not math.isclose(value, float(knob.default), rel_tol=1e-9, abs_tol=1e-12)
    return bool(value != knob.default)


def run_request(
    config: Mapping[str, Any], knobs: Sequence[Knob], values: Mapping[str, Any]
) -> RunRequest:
    """Speed, duration and the overrides of the knobs moved off the file's values."""
    speed: float | str | None = None
    duration: float | None = None
    overrides: dict[str, Any] = {}
    class_names = [str(c.get("name", "default")) for c in config.get("classes") or []]
    for knob in knobs:
        if knob.key not in values or not changed(knob, values[knob.key]):
            continue
        value = values[knob.key]
        if knob.scope == "run":
            if knob.key == "speed":
                speed = value if value == "max" else float(value)
            elif knob.key == "duration_s":
                duration = float(value)
            continue
        set_path(overrides, knob.path, knob.to_override(value, get_path(config, knob.path)))
        if knob.scope == "fleet":
            for index, name in enumerate(class_names):
                current = get_path(config["classes"][index], knob.path)
                set_path(overrides, ("classes", name, *knob.path), knob.to_override(value, current))
    return RunRequest(speed, duration, overrides)
