"""One name per domain: `cards`, `vehicles`, `sensors`, `shipping`, in `_` or `-` form as the
place needs. The names retired in 0.2 (`docs/names.md`) still work for one release: each use
prints a one-line note on stderr, once per name.

>>> canonical("cards"), canonical("vehicles")
('cards', 'vehicles')
>>> import contextlib, io
>>> with contextlib.redirect_stderr(io.StringIO()) as err:
...     name = canonical("connected-vehicles")
>>> name, err.getvalue().strip()
('vehicles', "note: 'connected-vehicles' is now 'vehicles' (the old name goes in 0.3)")
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

DOMAINS = ("cards", "vehicles", "sensors", "shipping")
#: Each retired name and the domain it stands for (scenario, job, settings section or CLI).
RETIRED: Mapping[str, str] = {
    "card_velocity": "cards",
    "card-velocity": "cards",
    "connected_vehicles": "vehicles",
    "connected-vehicles": "vehicles",
    "vehicle_telemetry": "vehicles",
    "vehicle-telemetry": "vehicles",
    "sensor_fleet": "sensors",
    "sensor-fleet": "sensors",
    "window_counts": "sensors",
    "window-counts": "sensors",
}
_noted: set[str] = set()


def canonical(name: str) -> str:
    """`name`, or the domain a retired name stands for (noted on stderr, once per name)."""
    new = RETIRED.get(name)
    if new is None:
        return name
    if name not in _noted:
        _noted.add(name)
        print(f"note: {name!r} is now {new!r} (the old name goes in 0.3)", file=sys.stderr)
    return new


def canonical_keys(data: Any) -> Any:
    """A mapping's retired keys renamed (a settings file written before 0.2); else `data`.

    >>> import contextlib, io
    >>> with contextlib.redirect_stderr(io.StringIO()):
    ...     canonical_keys({"window_counts": {"sensor_alerts": True}, "job": "sensors"})
    {'sensors': {'sensor_alerts': True}, 'job': 'sensors'}
    """
    if not isinstance(data, Mapping) or not any(k in RETIRED for k in data):
        return data
    return {canonical(k) if isinstance(k, str) else k: v for k, v in data.items()}


#: The salt each domain's random streams have been drawn under since before 0.2: kept, so a
#: seed still gives the stream it always gave (`simulators.seeds.rng_for`).
STREAM_SALT: Mapping[str, str] = {
    "cards": "card_velocity",
    "vehicles": "connected_vehicles",
    "sensors": "sensor_fleet",
}
