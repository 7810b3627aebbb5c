"""The data contracts between the parts, each declared once: topic names and keys
(`topics`), event schemas and what derives from them (`events`), the alert record (`alerts`),
and the label types per scenario (`labels`). Standard library only: `detectors` may import it.
"""

from core.contracts import labels, topics
from core.contracts.alerts import ALERT, ALERT_LAKE, ALERT_ROW
from core.contracts.events import (
    CARD_ACTIVITY,
    CARD_PROFILE,
    CARD_TRANSACTION,
    EVENTS,
    SENSOR_READING,
    VEHICLE_TELEMETRY,
    EventSchema,
    Field,
    Record,
)
from core.contracts.topics import Topic

__all__ = [
    "ALERT",
    "ALERT_LAKE",
    "ALERT_ROW",
    "CARD_ACTIVITY",
    "CARD_PROFILE",
    "CARD_TRANSACTION",
    "EVENTS",
    "SENSOR_READING",
    "VEHICLE_TELEMETRY",
    "EventSchema",
    "Field",
    "Record",
    "Topic",
    "labels",
    "topics",
]
