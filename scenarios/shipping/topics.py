"""The shipping topics and event schema ids, as `core.contracts` declares them."""

from __future__ import annotations

from core.contracts.events import SHIPPING_CONTAINER, SHIPPING_PORT_EVENT, SHIPPING_POSITION
from core.contracts.topics import (
    SHIPPING_CONTAINERS,
    SHIPPING_PORT_EVENTS,
    SHIPPING_POSITIONS,
)

POSITIONS = SHIPPING_POSITIONS.name  # key: ship id (IMO number)
CONTAINERS = SHIPPING_CONTAINERS.name  # key: container id (ISO 6346)
PORT_EVENTS = SHIPPING_PORT_EVENTS.name  # key: port (UN/LOCODE)

POSITION_SCHEMA = SHIPPING_POSITION.id
CONTAINER_SCHEMA = SHIPPING_CONTAINER.id
PORT_EVENT_SCHEMA = SHIPPING_PORT_EVENT.id

# The key's length tells its kind: IMO9999999 (10), ABCU1234567 (11), SGSIN (5).
TOPIC_BY_KEY_LENGTH = {10: POSITIONS, 11: CONTAINERS, 5: PORT_EVENTS}
