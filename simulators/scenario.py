"""What the engine needs from a domain scenario. The engine owns clocks and delivery; a scenario
only says which entities exist and what they truly do, as columns of true-time readings."""

from __future__ import annotations

from typing import Protocol

from simulators.encoding import PayloadField
from simulators.entities import EntityTable
from simulators.records import Readings


class Source(Protocol):
    """A cohort of entities, run as one SimPy process that steps every tick."""

    def readings(self, t0_ms: int, t1_ms: int) -> Readings | None:
        """Readings with true time in [t0_ms, t1_ms), each entity's in time order."""
        ...


class Scenario(Protocol):
    schema: str  # e.g. "sensor.reading/1"
    entity_field: str  # the entity id's key in an event, e.g. "sensor_id"
    topic: str  # where events go; truth goes to truth.<config name>
    id_prefix: str  # event ids look like <id_prefix>-<seed salt>-<n>
    labels: tuple[str, ...]  # labels[0] == "none"; the rest are fault or fraud types
    payload: tuple[PayloadField, ...]
    entity_ids: list[str]

    def sources(self, table: EntityTable) -> list[Source]: ...
