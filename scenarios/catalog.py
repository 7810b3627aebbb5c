"""The scenario catalog: the scenario file's model (the engine's common knobs plus one domain
section), and the scenario each domain section builds. It is the one list of domains: a new
domain adds its section model to `Domain` and a branch to `build_scenario` (mypy checks that
every member of the union has one).

    kind: scenario
    name: sensors
    seed: 7
    entities: 10000
    classes: [{name: meter, share: 0.7}, {name: tracker, share: 0.3, delivery: {...}}]
    clock: {...}        # defaults for every class
    delivery: {...}
    pacing: {speed: max}
    domain: {type: sensors, ...}

Scenario classes are imported when built, so a config loads fast.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, assert_never, get_args

from pydantic import (
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from core.config.base import Settings
from core.names import canonical
from scenarios.cards.config import CardsDomain
from scenarios.sensors.config import SensorsDomain
from scenarios.shipping.config import ShippingDomain
from scenarios.vehicles.config import VehiclesDomain
from simulators.settings import (
    DEFAULT_START,
    ClockSettings,
    DeliverySettings,
    EntityClass,
    PacingSettings,
    _aware,
)
from simulators.tagged import require_tag, untagged

if TYPE_CHECKING:
    from core.config import StackConfig
    from simulators.engine import ProgressFn, RunSummary
    from simulators.pacing import ControlFn
    from simulators.scenario import Scenario
    from simulators.sinks.base import Sink

DomainSection = SensorsDomain | CardsDomain | VehiclesDomain | ShippingDomain

# The `type` tag of each domain section, from the union itself.
_DOMAINS: tuple[str, ...] = tuple(
    get_args(model.model_fields["type"].annotation)[0] for model in get_args(DomainSection)
)

Domain = Annotated[
    DomainSection,
    Field(discriminator="type"),
    untagged(_DOMAINS),
    BeforeValidator(require_tag(_DOMAINS)),
]

_INHERITED = ("clock", "delivery")


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` wins key by key; nested mappings merge, except tagged ones whose `type` changes."""
    out = dict(base)
    for key, value in over.items():
        old = out.get(key)
        same_kind = isinstance(old, dict) and old.get("type") == (
            value.get("type", old.get("type")) if isinstance(value, dict) else None
        )
        if isinstance(old, dict) and isinstance(value, dict) and same_kind:
            out[key] = deep_merge(old, value)
        else:
            out[key] = value
    return out


def retired_names(data: Any) -> Any:
    """A scenario file written before 0.2: its name and domain type (`core.names`)."""
    if not isinstance(data, dict):
        return data
    domain = data.get("domain")
    if isinstance(domain, dict) and isinstance(domain.get("type"), str):
        data = {**data, "domain": {**domain, "type": canonical(domain["type"])}}
    if isinstance(data.get("name"), str):
        data = {**data, "name": canonical(data["name"])}
    return data


class ScenarioConfig(Settings):
    """Everything that decides a scenario's stream; with the seed, it fixes the content."""

    kind: Literal["scenario"] = Field("scenario", description="Marks a scenario file.")
    name: str = Field(
        "", pattern=r"^([a-z][a-z0-9_]*)?$", description="Names truth.<name>; default: domain.type."
    )
    seed: int = Field(0, ge=0, le=2**63 - 1, description="Seed of every random choice.")
    run_id: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="Mixed into every event, incident and outage id, not into the content: "
        "runs of one seed on shared topics keep distinct ids (an endpoint would answer a "
        "re-used transaction id as a repeat, a job would skip a re-used alert id). "
        "`streamsim demo` and the control panel set one per run. Unset: ids follow the seed.",
    )
    start: datetime = Field(DEFAULT_START, description="True time at simulation start (ISO 8601).")
    duration_s: float = Field(
        600.0, gt=0, description="Simulated seconds to generate readings for."
    )
    tick_s: float = Field(
        1.0,
        gt=0,
        le=3600,
        description="Engine step in simulated seconds (batching granularity; pacing still "
        "sends each event at its emit time).",
    )
    entities: int = Field(1000, ge=1, le=10_000_000, description="Number of devices/entities.")
    clock: ClockSettings = Field(
        default_factory=ClockSettings, description="Device clocks (all classes)."
    )
    delivery: DeliverySettings = Field(
        default_factory=DeliverySettings, description="Delivery model (all classes)."
    )
    classes: list[EntityClass] = Field(
        default_factory=lambda: [{"name": "default"}],  # type: ignore[arg-type]  # validated
        min_length=1,
        description="Entity classes with a share each; their clock/delivery merge over the top.",
    )
    pacing: PacingSettings = Field(default_factory=PacingSettings, description="Wall-time pacing.")
    domain: Domain = Field(
        default_factory=SensorsDomain, description="The domain model and its own knobs."
    )

    _aware_start = field_validator("start")(_aware)

    @model_validator(mode="before")
    @classmethod
    def _default_name(cls, data: Any) -> Any:
        data = retired_names(data)
        if isinstance(data, dict) and not data.get("name"):
            domain = data.get("domain")
            kind = domain.get("type") if isinstance(domain, dict) else None
            data = {**data, "name": kind or "sensors"}
        return data

    @field_validator("classes", mode="before")
    @classmethod
    def _inherit(cls, classes: Any, info: ValidationInfo) -> Any:
        """Merge the top-level clock/delivery under each class (unless the top level is bad)."""
        if not isinstance(classes, list):
            return classes
        names = [c.get("name", "default") for c in classes if isinstance(c, dict)]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"class names must be unique; repeated: {', '.join(dupes)}")
        for key in _INHERITED:
            if key not in info.data:
                continue  # invalid at the top level: reported there, once
            base = info.data[key].model_dump(mode="json")
            classes = [
                {**c, key: deep_merge(base, c.get(key) or {})} if isinstance(c, dict) else c
                for c in classes
            ]
        return classes

    @field_validator("domain")
    @classmethod
    def _known_classes(cls, domain: Any, info: ValidationInfo) -> Any:
        names = [c.name for c in info.data.get("classes", [])]
        for key, used in (
            ("interval_s_by_class", getattr(domain, "interval_s_by_class", {})),
            ("terminal_class/online_class", getattr(domain, "classes_used", [])),
            ("vehicle_types", getattr(domain, "vehicle_types", {})),
        ):
            unknown = sorted(set(used) - set(names))
            if names and unknown:
                raise ValueError(f"{key} names unknown classes {unknown}; the classes are {names}")
        return domain

    @property
    def start_ms(self) -> int:
        return int(self.start.timestamp() * 1000)

    def class_counts(self) -> list[int]:
        """Entities per class by largest remainder, so counts add up to `entities` exactly."""
        total = sum(c.share for c in self.classes)
        exact = [self.entities * c.share / total for c in self.classes]
        counts = [math.floor(x) for x in exact]
        by_remainder = sorted(range(len(exact)), key=lambda i: (counts[i] - exact[i], i))
        for i in by_remainder[: self.entities - sum(counts)]:
            counts[i] += 1
        return counts

    def with_overrides(self, **changes: Any) -> ScenarioConfig:
        """A copy with top-level keys replaced (e.g. seed, duration_s); revalidated."""
        data = self.model_dump(mode="json")
        for key, value in changes.items():
            if value is not None:
                data[key] = value
        return ScenarioConfig.model_validate(data)


def build_scenario(config: ScenarioConfig, stack: StackConfig | None = None) -> Scenario:
    """The scenario of `config.domain`; `stack` reaches scenarios that take one (e.g. for the
    card token secret); None: the built-in stack defaults."""
    domain = config.domain
    if isinstance(domain, SensorsDomain):
        from scenarios.sensors.scenario import SensorsScenario

        return SensorsScenario(config)
    if isinstance(domain, CardsDomain):
        from scenarios.cards.scenario import CardsScenario

        return CardsScenario(config, stack=stack)
    if isinstance(domain, VehiclesDomain):
        from scenarios.vehicles.scenario import VehiclesScenario

        return VehiclesScenario(config)
    if isinstance(domain, ShippingDomain):
        from scenarios.shipping.scenario import Shipping

        return Shipping(config)
    assert_never(domain)


def run_scenario(
    config: ScenarioConfig,
    sink: Sink,
    *,
    events: int | None = None,
    duration_s: float | None = None,
    speed: float | str | None = None,
    seed: int | None = None,
    progress: ProgressFn | None = None,
    stack: StackConfig | None = None,
    control: ControlFn | None = None,
) -> RunSummary:
    """Build a scenario and run it into a sink: for `duration_s` simulated seconds (default: the
    config's), or until `events` event records were sent. `speed` overrides pacing.speed ('max'
    or a factor). `stack`: the stack settings, for scenarios that need them (default: built-in
    defaults). `control`: live changes of speed and max_rate (`simulators.pacing`).

    Example (a benchmark of the engine and JSONL writing):
        cfg = load_model(ScenarioConfig, "config/scenarios/sensors.yaml")
        run_scenario(cfg, JsonlSink("/tmp/out"), events=1_000_000, speed="max").events_per_s
    """
    from simulators.engine import Engine

    if seed is not None:
        config = config.with_overrides(seed=seed)
    engine = Engine(build_scenario(config, stack), config, sink, speed=speed, control=control)
    return engine.run(events=events, duration_s=duration_s, progress=progress)
