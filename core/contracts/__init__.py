"""The data contracts between the parts, each declared once: topic names and keys
(`topics`), event schemas and what derives from them (`events`), and the label types per
scenario (`labels`)."""

from core.contracts import labels, topics
from core.contracts.events import (
    CARD_ACTIVITY,
    CARD_PROFILE,
    CARD_TRANSACTION,
    EVENTS,
    SENSOR_READING,
    VEHICLE_TELEMETRY,
    EventSchema,
    Field,
)
from core.contracts.topics import Topic

__all__ = [
    "CARD_ACTIVITY",
    "CARD_PROFILE",
    "CARD_TRANSACTION",
    "EVENTS",
    "SENSOR_READING",
    "VEHICLE_TELEMETRY",
    "EventSchema",
    "Field",
    "Topic",
    "labels",
    "topics",
]
