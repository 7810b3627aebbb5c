"""What the engine needs from a domain scenario. The engine owns clocks and delivery; a scenario
only says which entities exist and what they truly do, as columns of true-time readings.

Optional, looked up with getattr (a scenario without them behaves as before):
- `devices: EntityTable | None`: when an entity's events pass through other devices (a card's
  transactions through POS terminals), their table, in blocks of the scenario's classes.
  Readings then carry `dev`; clocks and delivery work per device; truth gains `device_id`.
- `truth_fields: tuple[TruthField, ...]`: extra truth keys from the rows' columns.
- `encoder(id_prefix, table) -> Encoder`: its own event serialisation (`encode(rows)`).
- `wrap_sink(sink) -> Sink`: e.g. send events elsewhere (HTTP) and truth to `sink`.
- `uses_stack = True` on the class: the registry passes `stack=StackConfig | None`.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from simulators.encoding import PayloadField
from simulators.entities import EntityTable
from simulators.records import Readings


class Encoder(Protocol):
    def encode(self, rows: np.ndarray) -> list[bytes]: ...


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
