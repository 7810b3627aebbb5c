"""Container-shipping rules, one module per incident type; each takes pandas frames of the
shipping topics' events (as their JSON decodes) and returns `Alert`s.

They see whole histories as they land: a voyage's readings arrive in bulk when the ship is in
port, so each rule works on whatever a container's or ship's history holds, in event-time
order, and the same call re-scores a backfilled voyage (alert ids are stable across calls).
"""

from detectors.shipping.door import DoorParams, door_tamper
from detectors.shipping.overboard import OverboardParams, lost_overboard
from detectors.shipping.reefer import ReeferParams, reefer_failure
from detectors.shipping.route import RouteParams, route_deviation
from detectors.shipping.unload import missed_unload

__all__ = [
    "DoorParams",
    "OverboardParams",
    "ReeferParams",
    "RouteParams",
    "door_tamper",
    "lost_overboard",
    "missed_unload",
    "reefer_failure",
    "route_deviation",
]
