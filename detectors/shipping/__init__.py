"""Container-shipping rules, one module per incident type; each takes pandas frames of the
shipping topics' events (as their JSON decodes) and returns `Alert`s.

They see whole histories as they land: a voyage's readings arrive in bulk when the ship is in
port, so each rule works on whatever a container's or ship's history holds, in event-time
order, and the same call re-scores a backfilled voyage (alert ids are stable across calls).

A door opened at sea alerts; the same door opened in port does not:

    >>> import pandas as pd
    >>> readings = pd.DataFrame({
    ...     "container_id": ["MSCU1234565"] * 3, "event_id": ["e1", "e2", "e3"],
    ...     "event_time": [0, 600_000, 1_200_000], "ship_id": ["9321483"] * 3,
    ...     "port": ["SGSIN", None, None], "door_open": [True, False, True]})
    >>> [(a.rule, a.event_ids) for a in door_tamper(readings)]
    [('door_tamper', ('e3',))]
"""

from detectors.shipping.door import DoorParams, door_tamper
from detectors.shipping.overboard import OverboardParams, lost_overboard, ship_log
from detectors.shipping.reefer import ReeferParams, reefer_failure
from detectors.shipping.route import RouteParams, route_deviation
from detectors.shipping.unload import missed_unload

#: The fields of each kind of shipping event the rules read (a frame with these columns, even
#: empty, is what every rule accepts).
CONTAINER_COLUMNS = (
    "event_id", "container_id", "event_time", "ship_id", "voyage_id", "port",
    "discharge_port", "temp_c", "setpoint_c", "power_kw", "door_open", "shock_g",
)  # fmt: skip
POSITION_COLUMNS = (
    "event_id", "ship_id", "event_time", "voyage_id", "lat", "lon", "sog_kn", "nav_status",
    "channel",
)  # fmt: skip
PORT_EVENT_COLUMNS = (
    "event_id", "event", "ship_id", "voyage_id", "port", "event_time", "container_id",
)  # fmt: skip

__all__ = [
    "CONTAINER_COLUMNS",
    "PORT_EVENT_COLUMNS",
    "POSITION_COLUMNS",
    "DoorParams",
    "OverboardParams",
    "ReeferParams",
    "RouteParams",
    "door_tamper",
    "lost_overboard",
    "missed_unload",
    "reefer_failure",
    "route_deviation",
    "ship_log",
]
