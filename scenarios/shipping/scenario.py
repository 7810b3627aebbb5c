"""Container shipping (Dunning & Friedman ch. 7): ships on real sea lanes, IoT containers on
board, port events; a voyage's data is held on board and arrives days late, in bulk, when the
ship's link comes up in the next port. See `docs/shipping.md`.

Entities are three classes, in this order: `ship` (key: IMO number, topic shipping.positions),
`container` (ISO 6346 number, shipping.containers) and `port` (UN/LOCODE, shipping.port-events).
The port class must have a count of at least the number of called ports; extra ports are listed
but never called.
"""

from __future__ import annotations

from core.errors import StreamsimError
from scenarios.catalog import ScenarioConfig
from scenarios.shipping.config import HARD_NEGATIVES, SHIPPING_INCIDENTS, ShippingDomain
from scenarios.shipping.encoding import ShippingEncoder
from scenarios.shipping.ids import imo_numbers, iso6346
from scenarios.shipping.lanes import port_table, ports
from scenarios.shipping.sink import ShippingTopics
from scenarios.shipping.topics import CONTAINER_SCHEMA, CONTAINERS
from scenarios.shipping.world import CARGO_TYPES, PAYLOAD_COLUMNS, ShippingWorld
from simulators.encoding import PayloadField
from simulators.entities import EntityTable
from simulators.scenario import Scenario
from simulators.seeds import rng_for
from simulators.sinks.base import Sink
from simulators.truth import TruthField

CLASSES = ("ship", "container", "port")
_KINDS = {"i4": "enum", "i8": "int", "f8": "float"}


class Shipping(Scenario):
    schema = CONTAINER_SCHEMA
    entity_field = "container_id"
    topic = CONTAINERS  # the wrapper sends positions and port events to their own topics
    labels = ("none", *SHIPPING_INCIDENTS)
    own_outages = True  # ships hold a voyage's data until the next port

    def __init__(self, config: ScenarioConfig) -> None:
        self.config = config
        self.domain: ShippingDomain = config.domain  # type: ignore[assignment]
        names = tuple(c.name for c in config.classes)
        if names != CLASSES:
            raise StreamsimError(
                f"{config.name}: classes must be {list(CLASSES)} in this order (got {list(names)})"
            )
        self.n_ships, self.n_containers, n_ports = config.class_counts()
        called = self.domain.ports
        if n_ports < len(called):
            raise StreamsimError(
                f"{config.name}: the port class has {n_ports} entities but the services call "
                f"{len(called)} ports; raise its share (entities split by share)"
            )
        extra = [c for c in sorted(port_table()) if c not in called][: n_ports - len(called)]
        self.ports = ports(called + extra)
        self.id_prefix = self.domain.id_prefix
        rng = rng_for(config.seed, "shipping", "ids")
        self.ship_ids = imo_numbers(self.n_ships, rng)
        codes = list(self.domain.owners.values())
        owner_of = rng.integers(len(codes), size=self.n_containers)
        serials = rng.choice(1_000_000, size=self.n_containers, replace=False)
        self.container_ids = [
            iso6346(codes[o], int(s))
            for o, s in zip(owner_of.tolist(), serials.tolist(), strict=True)
        ]
        self._owner_of = owner_of
        self.entity_ids = self.ship_ids + self.container_ids + [p.code for p in self.ports]
        self.payload = tuple(PayloadField(n, _KINDS[dt]) for n, dt, _ in PAYLOAD_COLUMNS)  # type: ignore[arg-type]
        self.truth_fields = (
            TruthField.choices("hard_negative", "hard_negative", (None, *HARD_NEGATIVES)),
        )

    def sources(self, table: EntityTable) -> list[ShippingWorld]:
        world = ShippingWorld(
            self.domain,
            self.n_ships,
            self.n_containers,
            self.ports,
            self.config.start_ms,
            rng_for(self.config.seed, "shipping", "world"),
        )
        world.owner[:] = self._owner_of  # the owner code is part of the container number
        return [world]

    def encoder(self, id_prefix: str, table: EntityTable) -> ShippingEncoder:
        return ShippingEncoder(
            id_prefix,
            table,
            self.ship_ids,
            self.container_ids,
            [p.code for p in self.ports],
            list(self.domain.owners),
            CARGO_TYPES,
        )

    def wrap_sink(self, sink: Sink) -> Sink:
        return ShippingTopics(sink)
