"""What the engine needs from a domain scenario. The engine owns clocks and delivery; a scenario
only says which entities exist and what they truly do, as columns of true-time readings.

A scenario subclasses `Scenario`: it sets the class attributes and `sources`; the optional
hooks below have defaults that change nothing, and a scenario overrides those it needs:
- `devices`: when an entity's events pass through other devices (a card's transactions through
  POS terminals), their table, in blocks of the scenario's classes. Readings then carry `dev`;
  clocks and delivery work per device; truth gains `device_id`. Default None: the entities.
- `truth_fields`: extra truth keys from the rows' columns. Default none.
- `encoder(id_prefix, table)`: the event serialisation. Default: the engine's `EventEncoder`
  of `payload`.
- `wrap_sink(sink)`: e.g. send events elsewhere (HTTP) and truth to `sink`. Default: `sink`.
- `own_outages`: the scenario takes devices offline itself too (verify-stream then expects
  outages beyond the engine's). Default False.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from simulators.encoding import EventEncoder, PayloadField
from simulators.entities import EntityTable
from simulators.records import Readings
from simulators.sinks.base import Sink
from simulators.truth import TruthField


class Encoder(Protocol):
    def encode(self, rows: np.ndarray) -> list[bytes]: ...


class Source(Protocol):
    """A cohort of entities, run as one SimPy process that steps every tick."""

    def readings(self, t0_ms: int, t1_ms: int) -> Readings | None:
        """Readings with true time in [t0_ms, t1_ms), each entity's in time order."""
        ...


class Scenario:
    """A domain scenario, built from its config before the engine runs it."""

    schema: str  # e.g. "sensor.reading/1"
    entity_field: str  # the entity id's key in an event, e.g. "sensor_id"
    topic: str  # where events go; truth goes to truth.<config name>
    id_prefix: str  # event ids look like <id_prefix>-<seed salt>-<n>
    labels: tuple[str, ...]  # labels[0] == "none"; the rest are fault or fraud types
    payload: tuple[PayloadField, ...]
    entity_ids: list[str]
    devices: EntityTable | None = None
    truth_fields: tuple[TruthField, ...] = ()

    def sources(self, table: EntityTable) -> Sequence[Source]:
        raise NotImplementedError

    def encoder(self, id_prefix: str, table: EntityTable) -> Encoder:
        return EventEncoder(self.schema, self.entity_field, id_prefix, table, self.payload)

    def wrap_sink(self, sink: Sink) -> Sink:
        return sink

    @property
    def own_outages(self) -> bool:
        return False
