"""Every Kafka topic, declared once: its name, what its records are keyed by, and whether it
is compacted.

Names look like `<domain>.<stream>`. The key is the entity id, so one entity's records stay in
order within a partition. A topic's name here is its default; configs may point a run at
another topic of the same shape.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Topic:
    """A topic: `name`, the record field its Kafka `key` is, and log `compacted` or not."""

    name: str
    key: str
    compacted: bool = False
    doc: str = ""

    def __str__(self) -> str:
        return self.name


CARDS_TRANSACTIONS = Topic("cards.transactions", "card_token", doc="Raw POS transactions.")
CARDS_ACTIVITY = Topic(
    "cards.activity", "card_token", doc="The endpoint's transactions with their decisions."
)
CARDS_VERDICTS = Topic(
    "cards.verdicts",
    "card_token",
    doc="What the endpoint answered the simulator in POS mode, one record a request.",
)
CARDS_PROFILES = Topic(
    "cards.profiles", "card_token", compacted=True, doc="The latest profile of each card."
)
CARDS_COMPROMISED_CARDS = Topic(
    "cards.compromised-cards",
    "terminal_id",
    doc="Bloom filters of the cards seen at a terminal in a window the compromised-terminal "
    "rule fired on (`core.contracts.compromised`).",
)
SENSORS_READINGS = Topic("sensors.readings", "sensor_id", doc="Sensor fleet readings.")
VEHICLES_TELEMETRY = Topic("vehicles.telemetry", "vehicle_id", doc="Vehicle telemetry, 1 Hz.")
SENSORS_CLOCK_OFFSETS = Topic(
    "sensors.clock-offsets",
    "device_id",
    compacted=True,
    doc="Each sensor's latest estimated clock offset (`pipeline.clock`).",
)
VEHICLES_CLOCK_OFFSETS = Topic(
    "vehicles.clock-offsets",
    "device_id",
    compacted=True,
    doc="Each vehicle's latest estimated clock offset (`pipeline.clock`).",
)
SHIPPING_POSITIONS = Topic(
    "shipping.positions", "ship_id", doc="Ship positions (IMO number), logged on board."
)
SHIPPING_CONTAINERS = Topic(
    "shipping.containers", "container_id", doc="Container readings (reefer, door, shock)."
)
SHIPPING_PORT_EVENTS = Topic(
    "shipping.port-events", "port", doc="Arrivals, departures, loads and unloads per port."
)
ALERTS = Topic("alerts", "entity_id", doc="Every detector's alerts, from every path.")
CARD_FEATURES = Topic(
    "aggregates.card-features", "entity_id", doc="Per-card window features (cards)."
)
VEHICLE_STATS = Topic(
    "aggregates.vehicle-stats", "entity_id", doc="Per-vehicle window stats (vehicles)."
)
VEHICLE_TRIPS = Topic("aggregates.vehicle-trips", "entity_id", doc="Per-trip summaries (vehicles).")
SENSOR_COUNTS = Topic(
    "aggregates.sensor-counts", "entity_id", doc="Per-entity window counts (sensors)."
)
HEAVY_HITTERS = Topic(
    "aggregates.heavy-hitters",
    "key",
    doc="Per-window busiest terminals, merchants, devices: Count-Min estimates (cards, sensors).",
)
DISTINCT_COUNTS = Topic(
    "aggregates.distinct-counts",
    "key",
    doc="Per-window distinct cards per terminal, devices per site: HyperLogLog (cards, sensors).",
)
METRICS = Topic(
    "metrics",
    "query",
    doc="Query progress (`pipeline.progress/1`, keyed by query name) and "
    "run records (`simulator.run/1`, keyed by scenario).",
)
DEADLETTER = Topic(
    "deadletter", "key", doc="Malformed records with the reason, under their original key."
)

TRUTH_PREFIX = "truth."

#: A record header a producer may add to tell its own resends apart: every produce call gets
#: its own value, so two records with the same one are one send written twice.
SEND_TAG_HEADER = "streamsim-send"


def truth(scenario: str) -> Topic:
    """The truth topic of a scenario (by its config name), keyed by event id.

    >>> truth("vehicles").name
    'truth.vehicles'
    """
    return Topic(TRUTH_PREFIX + scenario, "event_id", doc=f"Ground truth of {scenario}.")


def is_truth(name: str) -> bool:
    return name.startswith(TRUTH_PREFIX)


#: Every fixed topic (the truth topics are one per scenario: `truth(name)`).
TOPICS: tuple[Topic, ...] = (
    CARDS_TRANSACTIONS,
    CARDS_ACTIVITY,
    CARDS_VERDICTS,
    CARDS_PROFILES,
    CARDS_COMPROMISED_CARDS,
    SENSORS_READINGS,
    VEHICLES_TELEMETRY,
    SENSORS_CLOCK_OFFSETS,
    VEHICLES_CLOCK_OFFSETS,
    SHIPPING_POSITIONS,
    SHIPPING_CONTAINERS,
    SHIPPING_PORT_EVENTS,
    ALERTS,
    CARD_FEATURES,
    VEHICLE_STATS,
    VEHICLE_TRIPS,
    SENSOR_COUNTS,
    HEAVY_HITTERS,
    DISTINCT_COUNTS,
    METRICS,
    DEADLETTER,
)


def clock_offsets(domain: str) -> Topic:
    """The compacted per-device clock offset topic of `domain` (`sensors`, `vehicles`)."""
    return {"sensors": SENSORS_CLOCK_OFFSETS, "vehicles": VEHICLES_CLOCK_OFFSETS}[domain]
