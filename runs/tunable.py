"""The scenario keys a run request's `overrides` may set: the allow-list, declared once here.

Why an allow-list: `overrides` merge over a scenario file, and a file can say where its events
go and what they are called. Left open, a run request could point POS mode's card-number
bodies at any host (`domain.endpoint.url`), write into `alerts` or another scenario's truth
(`domain.topic`, `name`), reuse another run's ids (`run_id`) or start 10 million entities on
the panel's machine. So the panel and `POST /v1/control/runs` may tune only what a run is for:
- the run: `seed`, `duration_s`, `entities` (at most `PANEL_MAX_ENTITIES`), pacing's `speed`
  and `max_rate`;
- disorder: clock skew (offset, drift, jumps, resets), network delay, outages (rate, length,
  duplicated flushes), duplicates and drops, at the top level and per entity class by name
  (`classes.<name>.delivery...`);
- the domain's fraud or fault mix: every rate, including each entry of a rate keyed by type
  (`domain.faults.rate_per_hour.<fault>` of connected vehicles), weights, and POS mode.

Everything else is rejected with a 422 naming the key (`TunableKeys.check`). The panel's
sliders (`ui.knobs`) are built from these keys, as `GET /v1/scenarios` lists them per scenario.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.contracts.labels import CARD_FRAUDS, SENSOR_FAULTS, SHIPPING_FAULTS, VEHICLE_FAULTS

#: Any entity class of the scenario, by its name.
CLASS = "<class>"
#: At most this many entities from the panel: the largest shipped scenario (cards).
PANEL_MAX_ENTITIES = 100_000

Part = str | tuple[str, ...]  # a key, or any one of several keys


@dataclass(frozen=True)
class Tunable:
    """One key path (its last part is a leaf, set whole); `le`: the panel's upper bound."""

    path: tuple[Part, ...]
    le: float | None = None


def _disorder(*prefix: Part) -> tuple[Tunable, ...]:
    keys: tuple[tuple[str, ...], ...] = (
        ("clock", "offset_s"),
        ("clock", "drift_ppm"),
        ("clock", "jumps", "probability"),
        ("clock", "jumps", "size_s"),
        ("clock", "resets", "probability"),
        ("clock", "resets", "duration_s"),
        ("delivery", "delay_s"),
        ("delivery", "outages", "rate_per_hour"),
        ("delivery", "outages", "duration_s"),
        ("delivery", "outages", "flush_duplicates"),
        ("delivery", "duplicates", "probability"),
        ("delivery", "duplicates", "retry_delay_s"),
        ("delivery", "drops", "probability"),
    )
    return tuple(Tunable((*prefix, *key)) for key in keys)


_RUN = (
    Tunable(("seed",)),
    Tunable(("duration_s",)),
    Tunable(("pacing", "speed")),
    Tunable(("pacing", "max_rate")),
)
_ENTITIES = Tunable(("entities",), le=PANEL_MAX_ENTITIES)
_COMMON = (*_RUN, *_disorder(), *_disorder("classes", CLASS))

#: The allow-list: per scenario domain type (`domain.type`), every key the panel may set.
TUNABLE: dict[str, tuple[Tunable, ...]] = {
    "sensors": (
        _ENTITIES,
        *_COMMON,
        Tunable(("domain", "faults", "rate_per_hour")),
        Tunable(("domain", "faults", "duration_s")),
        Tunable(("domain", "faults", "mix", SENSOR_FAULTS)),
    ),
    "cards": (
        _ENTITIES,
        *_COMMON,
        Tunable(("domain", "delivery")),  # POS mode posts to the stack's own endpoint only
        Tunable(("domain", "fraud", CARD_FRAUDS, "rate_per_1k_card_hours")),
        Tunable(
            (
                "domain",
                "hard_negatives",
                ("busy_merchant", "large_purchase"),
                "rate_per_1k_card_hours",
            )
        ),
    ),
    "vehicles": (
        _ENTITIES,
        *_COMMON,
        Tunable(("domain", "faults", "rate_per_hour", VEHICLE_FAULTS)),
        Tunable(("domain", "hard_negatives", ("hard_brake", "brief_speeding"), "rate_per_hour")),
    ),
    # No `entities`: shipping's class shares are its counts of ships, containers and ports.
    "shipping": (
        *_COMMON,
        Tunable(("domain", "incidents", (*SHIPPING_FAULTS, "weather_routing"))),  # chances
    ),
}


def _expand(parts: Sequence[Part], classes: Sequence[str]) -> Iterator[tuple[str, ...]]:
    if not parts:
        yield ()
        return
    head, rest = parts[0], parts[1:]
    names = classes if head == CLASS else (head,) if isinstance(head, str) else head
    for name in names:
        for tail in _expand(rest, classes):
            yield (name, *tail)


class TunableKeys:
    """The allow-list of one scenario, its classes named: which override keys it takes."""

    def __init__(
        self,
        domain_type: str,
        classes: Sequence[str],
        tunables: Sequence[Tunable] | None = None,
    ) -> None:
        """`tunables`: another allow-list than the scenario domain's (a load test's)."""
        chosen = TUNABLE.get(domain_type, _COMMON) if tunables is None else tunables
        self.leaves: dict[tuple[str, ...], Tunable] = {
            path: tunable for tunable in chosen for path in _expand(tunable.path, classes)
        }
        self._inner = {path[:i] for path in self.leaves for i in range(1, len(path))}

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> TunableKeys:
        """The allow-list of a scenario file's data (raw or resolved)."""
        domain = data.get("domain")
        kind = domain.get("type") if isinstance(domain, Mapping) else None
        classes = data.get("classes")
        names = [
            str(c.get("name", "default"))
            for c in (classes if isinstance(classes, list) else [{}])
            if isinstance(c, Mapping)
        ]
        return cls(kind if isinstance(kind, str) else "sensors", names)

    def dotted(self) -> list[str]:
        """Every key, dotted (`classes.truck.delivery.drops.probability`), in declared order."""
        return [".".join(path) for path in self.leaves]

    def check(self, overrides: Mapping[str, Any]) -> list[dict[str, Any]]:
        """FastAPI-style problems (`loc` relative to the overrides) of every key not in the
        allow-list and every value over a panel bound; [] when all are allowed."""
        problems: list[dict[str, Any]] = []
        self._walk(overrides, (), problems)
        return problems

    def _walk(
        self, node: Mapping[str, Any], at: tuple[str, ...], problems: list[dict[str, Any]]
    ) -> None:
        for key, value in node.items():
            here = (*at, str(key))
            leaf = self.leaves.get(here)
            if leaf is not None:
                self._bound(leaf, here, value, problems)
            elif here in self._inner and isinstance(value, Mapping):
                self._walk(value, here, problems)
            elif here not in self._inner and _plain_mapping(value):
                self._refuse(value, here, problems)  # name each key inside it
            else:
                problems.append(self._not_tunable(here, value))

    def _refuse(
        self, node: Mapping[str, Any], at: tuple[str, ...], problems: list[dict[str, Any]]
    ) -> None:
        for key, value in node.items():
            here = (*at, str(key))
            if _plain_mapping(value):
                self._refuse(value, here, problems)
            else:
                problems.append(self._not_tunable(here, value))

    @staticmethod
    def _bound(
        leaf: Tunable, here: tuple[str, ...], value: Any, problems: list[dict[str, Any]]
    ) -> None:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if leaf.le is not None and number and value > leaf.le:
            problems.append(
                {
                    "loc": list(here),
                    "msg": f"key '{'.'.join(here)}': at most {leaf.le:g} from the panel "
                    f"(got {value})",
                    "type": "less_than_equal",
                    "input": value,
                    "ctx": {"le": leaf.le},
                }
            )

    def _children(self, at: tuple[str, ...]) -> list[str]:
        return sorted({p[len(at)] for p in self.leaves if len(p) > len(at) and p[: len(at)] == at})

    def _not_tunable(self, here: tuple[str, ...], value: Any) -> dict[str, Any]:
        key = ".".join(here)
        if here in self._inner:
            why = f"key '{key}' takes a mapping of its tunable keys: "
            why += ", ".join(self._children(here))
        else:
            parent = here[:-1]
            while parent and parent not in self._inner:
                parent = parent[:-1]
            where = f"under '{'.'.join(parent)}'" if parent else "at the top level"
            why = (
                f"key '{key}' cannot be set from the panel or the run-control API; the keys "
                f"tunable {where} are: {', '.join(self._children(parent))}"
            )
        return {"loc": list(here), "msg": why, "type": "not_tunable", "input": value}


def _plain_mapping(value: Any) -> bool:
    """A non-empty mapping of keys, not a tagged value (a distribution) set whole."""
    return isinstance(value, Mapping) and bool(value) and "type" not in value
