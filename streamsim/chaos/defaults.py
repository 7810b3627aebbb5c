"""What `streamsim chaos` runs when the user leaves --events, --speed and --entities out: per
fault, inputs and a pace that land the fault mid-stream and finish in minutes on 2 cores.

The pace is a wall-clock one: the simulator runs at speed `max` under a rate cap of
`events / produce_s` events per second (`pacing.max_rate`), so the run sends for about
`produce_s` whatever the scenario's event rate. A scenario's own rate can be far from what a
fault needs: the card scenario's 100,000 cards send 20,000 events in 15 simulated minutes (3 s
at speed 300, over before the Spark job's second batch), and its sensors at speed 1 take
minutes. An explicit `--speed` keeps the scenario's simulated-time pace instead (no cap).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scenarios.catalog import ScenarioConfig


@dataclass(frozen=True)
class FaultDefaults:
    events: int
    produce_s: float | None  # wall seconds the simulator sends over (None: it runs no scenario)
    max_entities: int | None  # at most this many of the scenario's entities (None: all)
    expect: str  # how long the whole command takes on 2 cores, said up front
    why: str  # what the pace is for, said up front


#: Card job faults run the cards job, whose alerts come once a 2-hour watermark passes them
#: (`driver.WATERMARK`): the input must span hours of simulated time, so few cards (2,000
#: cards send 12,000 events over about 5.5 simulated hours; 100,000 cards would need 200,000).
#: A scenario with fewer keeps its own count; `--entities` sets any.
JOB_ENTITIES = 2_000

DEFAULTS: dict[str, FaultDefaults] = {
    "broker": FaultDefaults(
        20_000, 30.0, None, "about 1 minute", "the broker is killed a third of the way in"
    ),
    "broker-of-3": FaultDefaults(
        20_000, 30.0, None, "about 2 minutes", "one broker is killed a third of the way in"
    ),
    "driver": FaultDefaults(
        12_000,
        90.0,
        JOB_ENTITIES,
        "about 3 minutes (two Spark runs of the job)",
        "the job must commit a batch and start the next while the simulator still sends",
    ),
    "lake-full": FaultDefaults(
        12_000,
        30.0,
        JOB_ENTITIES,
        "about 2 minutes (two Spark jobs side by side)",
        "the lake stays blocked until the job's first alerts batch tries to write",
    ),
    "slow-broker": FaultDefaults(
        3_000,
        40.0,
        JOB_ENTITIES,
        "about 1 minute",
        "the quotas go on once the simulator sends, and it must still send then",
    ),
    "endpoint": FaultDefaults(
        5_000, None, None, "under a minute", "the endpoint is killed once half is answered"
    ),
}


@dataclass(frozen=True)
class Plan:
    """What one chaos run sends, and at which pace."""

    fault: str
    events: int
    entities: int | None  # the entity count given (None: the scenario's, at most `max_entities`)
    max_entities: int | None
    speed: float | str | None  # passed to the simulator (None: the fault sends no scenario)
    max_rate: float | None  # events per wall second (None: no cap)

    def apply(self, config: ScenarioConfig) -> ScenarioConfig:
        """`config` with this plan's entity count and rate cap."""
        pacing = config.pacing.model_dump(mode="json")
        pacing.update(max_rate=self.max_rate, shape=None if self.max_rate else pacing["shape"])
        return config.with_overrides(entities=self.entities_of(config.entities), pacing=pacing)

    def entities_of(self, scenario_entities: int) -> int:
        """The entity count the run simulates, for a scenario of `scenario_entities`."""
        if self.entities is not None:
            return self.entities
        if self.max_entities is not None:
            return min(scenario_entities, self.max_entities)
        return scenario_entities

    def describe(self, scenario: str, scenario_entities: int) -> str:
        """The line said before the run starts: what is sent, at what pace, how long it takes."""
        defaults = DEFAULTS[self.fault]
        entities = self.entities_of(scenario_entities)
        if self.speed is None:
            sent = f"{self.events:,} requests"
        elif self.max_rate is not None:
            sent = (
                f"{self.events:,} events of {entities:,} entities over about "
                f"{self.events / self.max_rate:.0f}s ({self.max_rate:,.0f} events/s)"
            )
        else:
            sent = f"{self.events:,} events of {entities:,} entities at speed {self.speed}"
        return f"{self.fault} fault on {scenario}: {sent}; {defaults.why}; expect {defaults.expect}"


def plan(
    fault: str,
    events: int | None = None,
    speed: float | str | None = None,
    entities: int | None = None,
) -> Plan:
    """The run's inputs: what the user gave, else the fault's defaults (`DEFAULTS`).

    >>> plan("driver")
    Plan(fault='driver', events=12000, entities=None, max_entities=2000, speed='max', \
max_rate=133.33333333333334)
    >>> plan("broker", events=3000, speed=2.0)
    Plan(fault='broker', events=3000, entities=None, max_entities=None, speed=2.0, max_rate=None)
    """
    defaults = DEFAULTS[fault]
    n = defaults.events if events is None else events
    cap = defaults.max_entities
    if defaults.produce_s is None:
        return Plan(fault, n, entities, cap, None, None)
    if speed is not None:
        return Plan(fault, n, entities, cap, speed, None)
    return Plan(fault, n, entities, cap, "max", n / defaults.produce_s)
