"""The sensor feed: what the read API shows of `sensors.readings` and of the sensor alerts, per
run (pure, no Kafka; `live.consumers.sensors` fills it through a `VehicleTail`: the same
read budget, skipping ahead and CPU pacing as the vehicle feed).

- Devices: per (run, sensor) the site, the latest reading and a ring of the newest
  `history_len` readings (event time, seq, temperature, humidity, battery). LRU-bounded to
  `max_devices` over all runs (least recently updated first). A run is the event id's run part
  (`sf-<run>`, as the Shipping page's `run`); a rerun reuses the sensor ids, so runs are apart.
- Sites: the scenario names its sites (`site`) and gives them no coordinates, so the map places
  each at a fixed point derived from its name (`site_position`): a layout, not geography.
- Alerts: not kept here: `run_alerts` picks a run's sensor alerts (job `sensors` or a
  sensor label) from the alerts feed's newest rows, by the run part of the first event id.

Memory: a reading kept is a 5-tuple (~0.2 KB); 5,000 devices x 60 readings ~ 60 MB at most, and
in practice the tail's read cap samples a large fleet (see `live.consumers.vehicles`).
Per record: one JSON parse, a few dict reads, a deque append.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

from core.contracts import labels, topics
from core.contracts.events import SENSOR_READING
from live.views.records import json_object
from live.views.shipping import run_of

SENSORS_TOPIC = topics.SENSORS_READINGS.name
SENSOR_JOB = "sensors"
#: What the sensor detectors name: the scenario's faults and the job's own checks.
SENSOR_LABELS = frozenset((*labels.SENSOR_FAULTS, "low_battery", "silent_device"))
#: A reading kept: its fields in storage order.
SERIES_FIELDS = ("event_time", "seq", "temperature_c", "humidity_pct", "battery_v")
MAP_SIZE = 100.0


def site_position(site: str) -> tuple[float, float]:
    """A fixed (x, y) in [0, 100) for a site name: the same name, the same place.

    >>> site_position("Port Jennifer") == site_position("Port Jennifer")
    True
    """
    digest = hashlib.blake2b(site.encode(), digest_size=4).digest()
    return (
        round(int.from_bytes(digest[:2]) / 65536 * MAP_SIZE, 2),
        round(int.from_bytes(digest[2:]) / 65536 * MAP_SIZE, 2),
    )


def is_sensor_alert(row: dict[str, Any]) -> bool:
    return row.get("job") == SENSOR_JOB or row.get("label") in SENSOR_LABELS


def run_alerts(
    rows: list[dict[str, Any]], run: str | None, has_device: Callable[[str, str], bool]
) -> list[dict[str, Any]]:
    """The sensor alerts among `rows` (alert rows, e.g. the alerts feed's newest) that are
    `run`'s: by the run part of the first event id, or, for an alert naming no event (a
    silence), by the run having the device. Order kept; a replayed alert id once."""
    if run is None:
        return []
    seen: set[Any] = set()
    mine = []
    for row in rows:
        if not is_sensor_alert(row) or row.get("alert_id") in seen:
            continue
        ids = row.get("event_ids")
        if ids and isinstance(ids[0], str):
            if run_of(ids[0]) != run:
                continue
        elif not has_device(run, str(row.get("entity_id"))):
            continue
        seen.add(row.get("alert_id"))
        mine.append(row)
    return mine


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class Device:
    """One sensor of one run: site, status, newest readings."""

    __slots__ = ("readings", "site", "status")

    def __init__(self, site: str, history_len: int) -> None:
        self.site = site
        self.status: str | None = None
        self.readings: deque[tuple[Any, ...]] = deque(maxlen=history_len)


class SensorView:
    """Sensors and their sites by run (see the module doc). Thread-safe: one writer (the tail),
    many readers (request threads)."""

    def __init__(self, max_devices: int = 5_000, history_len: int = 60) -> None:
        if min(max_devices, history_len) < 1:
            raise ValueError("max_devices and history_len must be >= 1")
        self.max_devices = max_devices
        self.history_len = history_len
        self.devices: OrderedDict[tuple[str, str], Device] = OrderedDict()
        self.runs: dict[str, int] = {}  # run -> devices kept, in the order first read
        self.readings = 0
        self.malformed = 0
        self.evicted = 0
        self._lock = threading.Lock()

    # -- writing (the tails) ---------------------------------------------------------------------

    def add_raw(self, value: bytes | None, emitted_at: int | None, received_at: int) -> None:
        """One `sensors.readings` record as it comes off Kafka (the `VehicleTail` interface);
        a malformed one is counted."""
        record = json_object(value)
        if record is None or not self.add(record):
            self.malformed += 1

    def add(self, r: dict[str, Any]) -> bool:
        """Keep one reading; False if it is not a `sensor.reading`."""
        sensor, event_id, site = r.get("sensor_id"), r.get("event_id"), r.get("site")
        event_time, seq = r.get("event_time"), r.get("seq")
        if (
            r.get("schema") != SENSOR_READING.id
            or not isinstance(sensor, str)
            or not isinstance(event_id, str)
            or not isinstance(site, str)
            or not isinstance(event_time, int)
            or not isinstance(seq, int)
        ):
            return False
        row = (
            event_time,
            seq,
            _num(r.get("temperature_c")),
            _num(r.get("humidity_pct")),
            _num(r.get("battery_v")),
        )
        key = (run_of(event_id), sensor)
        with self._lock:
            device = self.devices.get(key)
            if device is None:
                device = self.devices[key] = Device(site, self.history_len)
                self.runs[key[0]] = self.runs.get(key[0], 0) + 1
                while len(self.devices) > self.max_devices:
                    (run, _), _ = self.devices.popitem(last=False)
                    self._drop_one(run)
            else:
                self.devices.move_to_end(key)
            device.site = site
            status = r.get("status")
            device.status = status if isinstance(status, str) else None
            device.readings.append(row)
            self.readings += 1
        return True

    def _drop_one(self, run: str) -> None:
        self.evicted += 1
        left = self.runs[run] - 1
        if left:
            self.runs[run] = left
        else:
            del self.runs[run]

    # -- reading (request threads) ---------------------------------------------------------------

    def run_of_request(self, run: str | None) -> str | None:
        """`run`, or the newest run read when None."""
        return run or next(reversed(self.runs), None)

    def fleet(
        self, run: str | None, alerts: list[dict[str, Any]], limit: int = 2000
    ) -> dict[str, Any]:
        """One run's devices (by id, at most `limit`) with their site position, latest reading
        and count of `alerts` (the run's, see `run_alerts`), its sites, and the runs kept
        (newest first). `run` None: the newest read."""
        per_sensor: dict[str, int] = {}
        for alert in alerts:
            sensor = str(alert.get("entity_id"))
            per_sensor[sensor] = per_sensor.get(sensor, 0) + 1
        with self._lock:
            run = self.run_of_request(run)
            mine = sorted((s, d) for (r, s), d in self.devices.items() if r == run)
            latest = [(s, d.site, d.status, max(d.readings)) for s, d in mine if d.readings]
            runs = [{"run": r, "devices": n} for r, n in reversed(self.runs.items())]
        devices: list[dict[str, Any]] = []
        sites: dict[str, dict[str, Any]] = {}
        for sensor, site_name, status, row in latest:
            x, y = site_position(site_name)
            site = sites.setdefault(
                site_name, {"site": site_name, "x": x, "y": y, "devices": 0, "alerts": 0}
            )
            site["devices"] += 1
            site["alerts"] += per_sensor.get(sensor, 0)
            devices.append(
                {
                    "sensor_id": sensor,
                    "site": site_name,
                    "x": x,
                    "y": y,
                    "status": status,
                    "alerts": per_sensor.get(sensor, 0),
                    "last": self._reading(row),
                }
            )
        return {
            "run": run,
            "runs": runs,
            "devices": devices[:limit],
            "count": min(len(devices), limit),
            "matched": len(devices),
            "sites": sorted(sites.values(), key=lambda s: s["site"]),
        }

    def series(self, sensor: str, run: str | None, limit: int = 60) -> dict[str, Any] | None:
        """One device's newest readings by event time, oldest first (a retried one once); None
        when the run has no such device."""
        with self._lock:
            run = self.run_of_request(run)
            device = self.devices.get((run or "", sensor))
            if device is None:
                return None
            rows = sorted({row[1]: row for row in device.readings}.values())[-limit:]
            site, status = device.site, device.status
        return {
            "run": run,
            "sensor_id": sensor,
            "site": site,
            "status": status,
            "readings": [self._reading(row) for row in rows],
        }

    def has_device(self, run: str, sensor: str) -> bool:
        return (run, sensor) in self.devices

    @staticmethod
    def _reading(row: tuple[Any, ...]) -> dict[str, Any]:
        return dict(zip(SERIES_FIELDS, row, strict=True))

    def stats(self) -> dict[str, int]:
        return {
            "devices": len(self.devices),
            "max_devices": self.max_devices,
            "history_len": self.history_len,
            "readings": self.readings,
            "malformed": self.malformed,
            "evicted": self.evicted,
        }
