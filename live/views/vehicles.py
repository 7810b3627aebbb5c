"""The vehicle feed: what the read API shows of `vehicles.telemetry` and of the vehicles' alerts.

Two parts:

- `VehicleView` (pure, no Kafka): the latest reading of each vehicle, LRU-bounded to
  `max_vehicles`, and a ring of recent readings (16 numeric signals, see `SIGNALS`) for at most
  `history_vehicles` of them, `history_len` readings each. Vehicle alerts (job
  `vehicles`, or a vehicle label) are kept per vehicle (the last `alerts_per_vehicle`).
- `VehicleTail` (`live.consumers.vehicles`): one consumer thread that feeds the view
  under a read budget.

Memory is bounded whatever the fleet: a latest reading is a slotted object (~0.5 KB with its
numbers; 10,000 vehicles ~5 MB), a history ring is flat `array`s preallocated per tracked
vehicle (300 readings x 16 doubles + 3 int64 ~ 45 KB; 200 vehicles ~ 9 MB), alerts are
capped per vehicle.

Which vehicles have a history: the first ones seen, until they stop reporting (parked) and
another vehicle needs the slot; a vehicle with an alert, or whose telemetry was asked for
(`want`), is pinned: it gets a slot at once (the least recently updated unpinned vehicle
gives it up) and keeps it. At most half of the slots are pinned (the oldest pin goes first).

The tail is cheap at any rate. The topic can carry 100k+ events/s at `--speed max`; the tail
reads at most `read_cap_per_s` records/s (default 5,000: a few % of a core to parse):
- each cycle (`cycle_s`) it reads up to its share of the budget, then idles until the cycle
  ends;
- when a cycle used the whole budget (the topic runs faster than the cap), the next cycle
  first jumps each partition ahead to `cap / partitions` records before its end, skipping the
  backlog in between (counted in `records_skipped`). What the view shows stays recent, and at
  high rates a vehicle's history is a sample (gaps), not every reading;
- librdkafka's prefetch queue is capped at 2 MB (default: 64 MB per consumer), so a fast topic
  costs little memory or network beyond what is read;
- below the cap nothing is skipped: every reading arrives.

Ordering: the Kafka key is the vehicle id, so one vehicle's readings come in emit order. A
reading is taken as the vehicle's latest (and into its history) only if its `seq` is higher
than the last one's (dropping duplicates and stragglers of a shuffled backlog flush), unless
the vehicle was silent for `parked_after_s` (a new run restarts `seq`; its history is reset).

Status, from processing time (when the API read a vehicle's reading or alert):
- `alerting`: an alert about it was detected within `alerting_for_s`;
- `parked`: nothing from it for `parked_after_s` (parked vehicles send nothing; a vehicle in a
  tunnel or dead zone also goes quiet until its backlog flushes);
- `moving`: reporting.
"""

from __future__ import annotations

import math
import threading
import time
from array import array
from collections import OrderedDict, deque
from typing import Any

import orjson

from core.contracts import VEHICLE_TELEMETRY, labels, topics
from core.contracts.events import TYRES

VEHICLES_TOPIC = topics.VEHICLES_TELEMETRY.name
VEHICLE_JOB = "vehicles"
VEHICLE_LABELS = frozenset(labels.VEHICLE_FAULTS)
#: What a telemetry request returns without `signal=`: what the page charts.
DEFAULT_SIGNALS: tuple[str, ...] = (
    "speed_kmh",
    "speed_limit_kmh",
    "coolant_c",
    "battery_v",
    *TYRES,
    "accel_long_ms2",
)
#: The numeric signals a vehicle's history keeps (`core.contracts.VEHICLE_TELEMETRY`'s), in
#: storage order: the charted ones first, then the others in the event's order.
SIGNALS: tuple[str, ...] = (
    *DEFAULT_SIGNALS,
    *(s for s in VEHICLE_TELEMETRY.signals() if s not in DEFAULT_SIGNALS),
)
SIGNAL_INDEX = {name: i for i, name in enumerate(SIGNALS)}
STATUSES = ("alerting", "moving", "parked")
_NAN = math.nan


def is_vehicle_alert(row: dict[str, Any]) -> bool:
    return row.get("job") == VEHICLE_JOB or row.get("label") in VEHICLE_LABELS


def _num(value: Any) -> float:
    """A JSON number as a float; NaN for null or anything else."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return _NAN


def _out(value: float) -> float | None:
    return None if value != value else value  # NaN -> null


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class Reading:
    """The latest reading of one vehicle, as much of it as the map and the list show."""

    __slots__ = (
        "accel_long_ms2",
        "battery_v",
        "coolant_c",
        "emitted_at",
        "event_time",
        "fix_event_time",
        "fuel_pct",
        "gps_fix",
        "heading_deg",
        "lat",
        "lon",
        "received_at",
        "road_class",
        "seq",
        "speed_kmh",
        "speed_limit_kmh",
        "trip_id",
        "tyre_min_kpa",
        "vehicle_id",
    )

    def __init__(
        self,
        record: dict[str, Any],
        seq: int,
        emitted_at: int | None,
        received_at: int,
        previous: Reading | None,
    ) -> None:
        self.vehicle_id: str = record["vehicle_id"]
        self.seq = seq
        self.event_time = _int(record.get("event_time"))
        self.emitted_at = emitted_at
        self.received_at = received_at
        self.trip_id = _int(record.get("trip_id"))
        road = record.get("road_class")
        self.road_class = road if isinstance(road, str) else None
        self.speed_limit_kmh = _out(_num(record.get("speed_limit_kmh")))
        self.speed_kmh = _out(_num(record.get("speed_kmh")))
        self.heading_deg = _out(_num(record.get("heading_deg")))
        self.accel_long_ms2 = _out(_num(record.get("accel_long_ms2")))
        self.coolant_c = _out(_num(record.get("coolant_c")))
        self.battery_v = _out(_num(record.get("battery_v")))
        self.fuel_pct = _out(_num(record.get("fuel_pct")))
        tyres = [_num(record.get(k)) for k in TYRES]
        known = [t for t in tyres if t == t]
        self.tyre_min_kpa = min(known) if known else None
        lat, lon = _num(record.get("lat")), _num(record.get("lon"))
        self.gps_fix = lat == lat and lon == lon  # null in tunnels: keep the last fix
        if self.gps_fix:
            self.lat: float | None = lat
            self.lon: float | None = lon
            self.fix_event_time = self.event_time
        elif previous is not None:
            self.lat, self.lon = previous.lat, previous.lon
            self.fix_event_time = previous.fix_event_time
        else:
            self.lat = self.lon = None
            self.fix_event_time = None

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


class History:
    """The last `size` readings of one vehicle, oldest first by `seq`: a ring over flat arrays
    (signal values as doubles, NaN for null; event time, seq and receipt time as int64)."""

    __slots__ = ("count", "event_times", "head", "received", "seqs", "size", "values", "width")

    def __init__(self, size: int, width: int = len(SIGNALS)) -> None:
        self.size = size
        self.width = width
        self.values = array("d", [_NAN]) * (size * width)
        self.event_times = array("q", [0]) * size
        self.seqs = array("q", [0]) * size
        self.received = array("q", [0]) * size
        self.head = 0  # where the next reading goes
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def add(self, event_time: int, seq: int, received_at: int, values: array[float]) -> None:
        i = self.head
        base = i * self.width
        self.values[base : base + self.width] = values
        self.event_times[i] = event_time
        self.seqs[i] = seq
        self.received[i] = received_at
        self.head = (i + 1) % self.size
        self.count = min(self.count + 1, self.size)

    def rows(self, limit: int, signals: tuple[str, ...]) -> list[dict[str, Any]]:
        """The newest `limit` readings, oldest first: event_time, seq, received_at, signals."""
        n = max(0, min(limit, self.count))
        columns = [(name, SIGNAL_INDEX[name]) for name in signals]
        out = []
        for k in range(self.count - n, self.count):
            i = (self.head - self.count + k) % self.size
            base = i * self.width
            row: dict[str, Any] = {
                "event_time": self.event_times[i],
                "seq": self.seqs[i],
                "received_at": self.received[i],
            }
            for name, j in columns:
                row[name] = _out(self.values[base + j])
            out.append(row)
        return out

    def nbytes(self) -> int:
        arrays = (self.values, self.event_times, self.seqs, self.received)
        return sum(a.itemsize * len(a) for a in arrays)


def _row_of(
    vehicle: str,
    reading: Reading | None,
    status: str,
    last_alert: dict[str, Any] | None,
    alerts: int,
    history: int,
    now_ms: int,
) -> dict[str, Any]:
    if reading is not None:
        row = reading.to_dict()
    else:  # only an alert of it so far
        row = {**dict.fromkeys(Reading.__slots__), "vehicle_id": vehicle}
    row["status"] = status
    row["silent_s"] = (
        None if reading is None else round(max(0, now_ms - reading.received_at) / 1000, 3)
    )
    row["last_alert"] = last_alert
    row["alerts"] = alerts
    row["history"] = history
    return row


class VehicleView:
    """Latest reading per vehicle, histories, and vehicle alerts; thread-safe (one lock)."""

    def __init__(
        self,
        *,
        max_vehicles: int = 10_000,
        history_vehicles: int = 200,
        history_len: int = 300,
        alerts_per_vehicle: int = 20,
        parked_after_s: float = 30.0,
        alerting_for_s: float = 600.0,
    ) -> None:
        self.max_vehicles = max_vehicles
        self.history_vehicles = history_vehicles
        self.history_len = history_len
        self.alerts_per_vehicle = alerts_per_vehicle
        self.parked_after_ms = int(parked_after_s * 1000)
        self.alerting_for_ms = int(alerting_for_s * 1000)
        self._latest: OrderedDict[str, Reading] = OrderedDict()  # least recently updated first
        self._history: OrderedDict[str, History] = OrderedDict()  # least recently updated first
        self._pinned: OrderedDict[str, None] = OrderedDict()  # oldest pin first
        self._alerts: OrderedDict[str, deque[dict[str, Any]]] = OrderedDict()
        self._alerted_at: dict[str, int] = {}
        self._no_slot_before = 0  # epoch ms: every slot is held by a vehicle heard since
        self._lock = threading.Lock()
        self.readings = 0  # taken as a vehicle's latest
        self.stale = 0  # duplicates and stragglers (seq not newer)
        self.malformed = 0
        self.alerts_seen = 0

    # -- writes -----------------------------------------------------------------------------

    def add_raw(self, value: bytes | None, emitted_at: int | None, received_at: int) -> None:
        try:
            record = orjson.loads(value or b"")
        except orjson.JSONDecodeError:
            self.malformed += 1
            return
        self.add(record, received_at, emitted_at)

    def add(self, record: Any, received_at: int, emitted_at: int | None = None) -> bool:
        """Take one `vehicle.telemetry/1` record; False if it is not one or not newer."""
        if not isinstance(record, dict) or not isinstance(record.get("vehicle_id"), str):
            self.malformed += 1
            return False
        vehicle = record["vehicle_id"]
        seq = _int(record.get("seq"))
        if seq is None:
            self.malformed += 1
            return False
        with self._lock:
            previous = self._latest.get(vehicle)
            if previous is not None and seq <= previous.seq:
                if received_at - previous.received_at <= self.parked_after_ms:
                    self.stale += 1
                    return False
                previous = None  # silent for long, seq went back: a new run; start over
                self._history.pop(vehicle, None)
            reading = Reading(record, seq, emitted_at, received_at, previous)
            self._latest[vehicle] = reading
            self._latest.move_to_end(vehicle)
            if len(self._latest) > self.max_vehicles:
                gone, _ = self._latest.popitem(last=False)
                self._forget(gone)
            self.readings += 1
            history = self._history.get(vehicle)
            if history is None:
                history = self._slot(vehicle, received_at)
            if history is not None and reading.event_time is not None:
                values = array("d", [_num(record.get(name)) for name in SIGNALS])
                history.add(reading.event_time, seq, received_at, values)
                self._history.move_to_end(vehicle)
            return True

    def add_alert(self, row: dict[str, Any], received_at: int | None = None) -> bool:
        """Keep a vehicle alert (an `alert_row`); False if it is not one or already kept."""
        vehicle = row.get("entity_id")
        if not isinstance(vehicle, str) or not is_vehicle_alert(row):
            return False
        now = time.time_ns() // 1_000_000 if received_at is None else received_at
        with self._lock:
            kept = self._alerts.get(vehicle)
            if kept is None:
                kept = self._alerts[vehicle] = deque(maxlen=self.alerts_per_vehicle)
                if len(self._alerts) > self.max_vehicles:
                    gone, _ = self._alerts.popitem(last=False)
                    self._alerted_at.pop(gone, None)
            if any(a.get("alert_id") == row.get("alert_id") for a in kept):
                return False  # a replay
            kept.append(row)
            self._alerts.move_to_end(vehicle)
            detected = _int(row.get("detected_at"))
            at = max(self._alerted_at.get(vehicle, 0), detected if detected is not None else now)
            self._alerted_at[vehicle] = at
            self.alerts_seen += 1
            self._pin(vehicle, now)
            return True

    def want(self, vehicle: str, now_ms: int | None = None) -> None:
        """Someone asked for this vehicle's telemetry: track its history from now on."""
        with self._lock:
            if vehicle in self._latest or vehicle in self._alerts:
                self._pin(vehicle, time.time_ns() // 1_000_000 if now_ms is None else now_ms)

    def _pin(self, vehicle: str, now_ms: int) -> None:
        self._pinned[vehicle] = None
        self._pinned.move_to_end(vehicle)
        while len(self._pinned) > max(1, self.history_vehicles // 2):
            self._pinned.popitem(last=False)
        if vehicle not in self._history:
            self._slot(vehicle, now_ms, force=True)

    def _slot(self, vehicle: str, now_ms: int, *, force: bool = False) -> History | None:
        """A history for `vehicle` if a slot is free or can be freed (see the module doc): the
        least recently updated unpinned vehicle gives its slot up if it is silent (or if
        `force`). O(1) per reading even when every slot is taken."""
        if len(self._history) >= self.history_vehicles:
            if not force and now_ms < self._no_slot_before:
                return None
            victim = None
            for _ in range(len(self._history)):
                candidate = next(iter(self._history))
                if candidate in self._pinned:  # pinned keep their slots: to the back
                    self._history.move_to_end(candidate)
                    continue
                victim = candidate
                break
            if victim is None:
                return None
            latest = self._latest.get(victim)
            silent_from = self.parked_after_ms + (latest.received_at if latest else 0)
            if not force and now_ms <= silent_from:
                self._no_slot_before = silent_from + 1  # nobody is silent before then
                return None
            del self._history[victim]
        history = self._history[vehicle] = History(self.history_len)
        return history

    def _forget(self, vehicle: str) -> None:
        if vehicle not in self._alerts:
            self._history.pop(vehicle, None)
            self._pinned.pop(vehicle, None)

    # -- reads ------------------------------------------------------------------------------

    def status_of(self, vehicle: str, reading: Reading | None, now_ms: int) -> str:
        alerted = self._alerted_at.get(vehicle)
        if alerted is not None and now_ms - alerted <= self.alerting_for_ms:
            return "alerting"
        if reading is None or now_ms - reading.received_at > self.parked_after_ms:
            return "parked"
        return "moving"

    def _row(self, vehicle: str, reading: Reading | None, now_ms: int) -> dict[str, Any]:
        alerts = self._alerts.get(vehicle)
        history = self._history.get(vehicle)
        return _row_of(
            vehicle,
            reading,
            self.status_of(vehicle, reading, now_ms),
            alerts[-1] if alerts else None,
            len(alerts) if alerts else 0,
            len(history) if history is not None else 0,
            now_ms,
        )

    def vehicles(
        self, now_ms: int, limit: int, status: str | None = None
    ) -> tuple[list[dict[str, Any]], dict[str, int]]:
        """Up to `limit` vehicles (alerting first, then moving, then parked; by id within),
        and the count per status over all of them. Rows are built for those returned only,
        outside the lock (a `Reading` is never changed, only replaced)."""
        order = {s: i for i, s in enumerate(STATUSES)}
        counts = dict.fromkeys(STATUSES, 0)
        with self._lock:
            keys: list[tuple[int, str]] = []
            for vehicle in self._latest.keys() | self._alerts.keys():
                state = self.status_of(vehicle, self._latest.get(vehicle), now_ms)
                counts[state] += 1
                if status is None or state == status:
                    keys.append((order[state], vehicle))
            keys.sort()
            picked = []
            for rank, vehicle in keys[: max(0, limit)]:
                alerts = self._alerts.get(vehicle)
                history = self._history.get(vehicle)
                picked.append(
                    (
                        vehicle,
                        self._latest.get(vehicle),
                        STATUSES[rank],
                        alerts[-1] if alerts else None,
                        len(alerts) if alerts else 0,
                        len(history) if history is not None else 0,
                    )
                )
        return [_row_of(*p, now_ms) for p in picked], counts

    def telemetry(
        self, vehicle: str, now_ms: int, limit: int, signals: tuple[str, ...]
    ) -> dict[str, Any] | None:
        """The vehicle's latest reading, recent readings (oldest first) and alerts (newest
        first); None if it was never seen."""
        with self._lock:
            reading = self._latest.get(vehicle)
            alerts = self._alerts.get(vehicle)
            if reading is None and alerts is None:
                return None
            history = self._history.get(vehicle)
            readings = [] if history is None else history.rows(limit, signals)
            return {
                "vehicle_id": vehicle,
                "vehicle": self._row(vehicle, reading, now_ms),
                "signals": list(signals),
                "readings": readings,
                "alerts": list(reversed(alerts)) if alerts else [],
                "tracked": history is not None,
                "history_len": self.history_len,
            }

    def sizes(self) -> dict[str, int]:
        with self._lock:
            return {
                "vehicles": len(self._latest),
                "max_vehicles": self.max_vehicles,
                "with_history": len(self._history),
                "history_vehicles": self.history_vehicles,
                "history_len": self.history_len,
                "pinned": len(self._pinned),
                "history_bytes": sum(h.nbytes() for h in self._history.values()),
            }
