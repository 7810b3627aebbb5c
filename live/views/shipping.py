"""The container view: what the owner-scoped read API shows of `shipping.containers` and
`shipping.port-events` (pure, no Kafka; `live.consumers.shipping` fills it).

Per container (LRU-bounded to `max_containers`, least recently updated evicted first):
- its owner, fixed by the first record seen of the run; a later record naming another owner
  is dropped and counted (`owner_conflicts`), never shown to either owner;
- the ship's log: one leg per (ship, voyage) with its first and last event time, readings,
  readings with the door open at sea, alarms, and the ports it was loaded and unloaded at,
  so a box's history runs on across ships (transshipment at a hub: one leg ends, one starts);
- the newest `history_len` readings by event time, and the last `port_events_len` loaded /
  unloaded port events.

A voyage's readings arrive days late, in bulk, after the live satellite slice of the same
days, so readings are kept in event-time order whatever order they come in. A retried reading
(the same `seq`) is counted once. Records of a new run (the event id's run prefix changes; a
rerun reuses container ids) start the container's history afresh.

Memory: a reading kept is a tuple of a dozen fields (~0.4 KB); 12,000 boxes x 16 readings
~ 80 MB at most, legs and port events a few KB per box.
"""

from __future__ import annotations

import bisect
import sys
import threading
from collections import OrderedDict
from typing import Any

from core.contracts import topics
from core.contracts.events import SHIPPING_CONTAINER, SHIPPING_PORT_EVENT
from live.views.records import json_object

CONTAINERS_TOPIC = topics.SHIPPING_CONTAINERS.name
PORT_EVENTS_TOPIC = topics.SHIPPING_PORT_EVENTS.name
#: The reading fields a history keeps and returns, in this order.
READING_FIELDS = (
    "event_id",
    "seq",
    "event_time",
    "emitted_at",
    "ship_id",
    "voyage_id",
    "port",
    "temp_c",
    "setpoint_c",
    "power_kw",
    "door_open",
    "shock_g",
    "alarm",
    "channel",
)
_SEQ = READING_FIELDS.index("seq")
_TIME = READING_FIELDS.index("event_time")
_SHIP = READING_FIELDS.index("ship_id")
MAX_SEQ = 1 << 22  # a bitmap of seen sequence numbers costs at most 512 KB per box


def run_of(event_id: str) -> str:
    """The run part of an event id (`sh-<run>-<hash>`).

    >>> run_of("sh-58ffe47c-e3d104a71d")
    'sh-58ffe47c'
    """
    return event_id.rpartition("-")[0]


def _str(value: Any) -> str | None:
    return sys.intern(value) if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class Leg:
    """A container's time on one ship's voyage leg."""

    __slots__ = ("alarms", "door_opens", "first", "last", "loaded_at", "readings", "unloaded_at")

    def __init__(self) -> None:
        self.first: int | None = None
        self.last: int | None = None
        self.readings = 0
        self.door_opens = 0
        self.alarms = 0
        self.loaded_at: str | None = None
        self.unloaded_at: str | None = None

    def seen(self, event_time: int) -> None:
        self.first = event_time if self.first is None else min(self.first, event_time)
        self.last = event_time if self.last is None else max(self.last, event_time)


class Box:
    """One container's owner, latest static fields, log, readings and port events."""

    __slots__ = (
        "cargo",
        "container_id",
        "discharge_port",
        "final_port",
        "legs",
        "owner",
        "port_events",
        "readings",
        "reefer",
        "run",
        "seen_seq",
    )

    def __init__(self, container_id: str, owner: str, run: str) -> None:
        self.container_id = container_id
        self.owner = owner
        self.run = run
        self.cargo: str | None = None
        self.reefer: bool | None = None
        self.discharge_port: str | None = None
        self.final_port: str | None = None
        self.legs: dict[tuple[str, int | None], Leg] = {}
        self.readings: list[tuple[Any, ...]] = []  # by (event_time, seq)
        self.port_events: list[dict[str, Any]] = []
        self.seen_seq = bytearray()

    def first_seen(self, seq: int) -> bool:
        """Whether `seq` is new (and mark it); out-of-range numbers count as new."""
        if not 0 <= seq < MAX_SEQ:
            return True
        byte, bit = divmod(seq, 8)
        if byte >= len(self.seen_seq):
            self.seen_seq.extend(bytes(byte + 1 - len(self.seen_seq)))
        if self.seen_seq[byte] >> bit & 1:
            return False
        self.seen_seq[byte] |= 1 << bit
        return True


class ContainerView:
    """Container histories by owner (see the module doc). Thread-safe: one writer (the tail),
    many readers (request threads)."""

    def __init__(
        self, max_containers: int = 12_000, history_len: int = 16, port_events_len: int = 64
    ) -> None:
        if min(max_containers, history_len, port_events_len) < 1:
            raise ValueError("max_containers, history_len and port_events_len must be >= 1")
        self.max_containers = max_containers
        self.history_len = history_len
        self.port_events_len = port_events_len
        self.boxes: OrderedDict[str, Box] = OrderedDict()
        self.readings = 0
        self.duplicates = 0
        self.malformed = 0
        self.owner_conflicts = 0
        self.evicted = 0
        self._lock = threading.Lock()

    # -- writing (the tail thread) --------------------------------------------------------------

    def add_raw(self, topic: str, value: bytes | None, emitted_at: int | None) -> None:
        """One record of `topic` as it comes off Kafka; a malformed one is counted."""
        self.add(topic, json_object(value), emitted_at)

    def add(self, topic: str, record: dict[str, Any] | None, emitted_at: int | None) -> None:
        """One parsed record of `topic` (None: it was malformed)."""
        if record is None:
            self.malformed += 1
            return
        if topic == PORT_EVENTS_TOPIC:
            self.add_port_event(record)
        else:
            self.add_reading(record, emitted_at)

    def _box(self, container_id: str, owner: str, event_id: str) -> Box | None:
        """The container's entry for this record's run (new or restarted), or None when the
        record names another owner than the run's first record did."""
        run = run_of(event_id)
        box = self.boxes.get(container_id)
        if box is None or box.run != run:
            box = Box(container_id, owner, run)
            self.boxes[container_id] = box
            while len(self.boxes) > self.max_containers:
                self.boxes.popitem(last=False)
                self.evicted += 1
        elif box.owner != owner:
            self.owner_conflicts += 1
            return None
        self.boxes.move_to_end(container_id)
        return box

    def add_reading(self, r: dict[str, Any], emitted_at: int | None = None) -> None:
        box_id, owner, event_id = r.get("container_id"), r.get("owner"), r.get("event_id")
        seq, event_time = _int(r.get("seq")), _int(r.get("event_time"))
        if (
            r.get("schema") != SHIPPING_CONTAINER.id
            or not isinstance(box_id, str)
            or not isinstance(owner, str)
            or not isinstance(event_id, str)
            or seq is None
            or event_time is None
        ):
            self.malformed += 1
            return
        with self._lock:
            box = self._box(box_id, owner, event_id)
            if box is None:
                return
            if not box.first_seen(seq):
                self.duplicates += 1
                return
            self.readings += 1
            box.cargo = _str(r.get("cargo"))
            box.reefer = bool(r.get("reefer"))
            box.discharge_port = _str(r.get("discharge_port"))
            box.final_port = _str(r.get("final_port"))
            ship = _str(r.get("ship_id"))
            if ship is not None:
                leg = box.legs.setdefault((ship, _int(r.get("voyage_id"))), Leg())
                leg.seen(event_time)
                leg.readings += 1
                leg.door_opens += bool(r.get("door_open")) and r.get("port") is None
                leg.alarms += r.get("alarm") not in (None, "none")
            row = tuple(
                emitted_at
                if f == "emitted_at"
                else _str(r.get(f))
                if f in ("event_id", "ship_id", "port", "alarm", "channel")
                else r.get(f)
                for f in READING_FIELDS
            )
            readings = box.readings
            bisect.insort(readings, row, key=lambda x: (x[_TIME], x[_SEQ]))
            if len(readings) > self.history_len:
                del readings[0]

    def add_port_event(self, r: dict[str, Any]) -> None:
        """A loaded / unloaded event of a container (arrivals and departures name none)."""
        box_id, owner, event_id = r.get("container_id"), r.get("owner"), r.get("event_id")
        if r.get("schema") != SHIPPING_PORT_EVENT.id or not isinstance(event_id, str):
            self.malformed += 1
            return
        if box_id is None:
            return  # a ship's arrival or departure
        event_time, kind = _int(r.get("event_time")), r.get("event")
        if not isinstance(box_id, str) or not isinstance(owner, str) or event_time is None:
            self.malformed += 1
            return
        with self._lock:
            box = self._box(box_id, owner, event_id)
            if box is None:
                return
            ship, voyage, port = (
                _str(r.get("ship_id")),
                _int(r.get("voyage_id")),
                _str(r.get("port")),
            )
            if ship is not None:
                leg = box.legs.setdefault((ship, voyage), Leg())
                leg.seen(event_time)
                if kind == "loaded":
                    leg.loaded_at = port
                elif kind == "unloaded":
                    leg.unloaded_at = port
            if box.cargo is None:
                box.cargo = _str(r.get("cargo"))
            box.port_events.append(
                {
                    "event_id": event_id,
                    "event": kind,
                    "event_time": event_time,
                    "port": port,
                    "ship_id": ship,
                    "voyage_id": voyage,
                }
            )
            if len(box.port_events) > self.port_events_len:
                box.port_events.sort(key=lambda e: e["event_time"])
                del box.port_events[0]

    # -- reading (request threads) -------------------------------------------------------------

    def containers(
        self,
        owner: str,
        limit: int,
        prefix: str | None = None,
        ship_id: str | None = None,
        run: str | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        """The owner's containers (by id; only ids starting with `prefix`, only those whose
        latest reading was on `ship_id`, only those of `run`), at most `limit`, and how many
        matched."""
        with self._lock:
            mine = [
                b
                for b in self.boxes.values()
                if b.owner == owner
                and (prefix is None or b.container_id.startswith(prefix))
                and (run is None or b.run == run)
                and (ship_id is None or (b.readings and b.readings[-1][_SHIP] == ship_id))
            ]
            mine.sort(key=lambda b: b.container_id)
            return [self._summary(b) for b in mine[:limit]], len(mine)

    def history(self, owner: str, container_id: str) -> dict[str, Any] | None:
        """The container's log, readings and port events, or None when it is unknown or
        another owner's (the caller cannot tell which)."""
        with self._lock:
            box = self.boxes.get(container_id)
            if box is None or box.owner != owner:
                return None
            legs = sorted(box.legs.items(), key=lambda kv: (kv[1].first or 0, kv[0]))
            return {
                **self._summary(box),
                "legs": [
                    {
                        "ship_id": ship,
                        "voyage_id": voyage,
                        "first_event_time": leg.first,
                        "last_event_time": leg.last,
                        "readings": leg.readings,
                        "door_opens_at_sea": leg.door_opens,
                        "alarms": leg.alarms,
                        "loaded_at": leg.loaded_at,
                        "unloaded_at": leg.unloaded_at,
                    }
                    for (ship, voyage), leg in legs
                ],
                "readings": [dict(zip(READING_FIELDS, row, strict=True)) for row in box.readings],
                "port_events": sorted(box.port_events, key=lambda e: e["event_time"]),
            }

    def _summary(self, box: Box) -> dict[str, Any]:
        last = dict(zip(READING_FIELDS, box.readings[-1], strict=True)) if box.readings else None
        return {
            "container_id": box.container_id,
            "owner": box.owner,
            "cargo": box.cargo,
            "reefer": box.reefer,
            "discharge_port": box.discharge_port,
            "final_port": box.final_port,
            "legs_count": len(box.legs),
            "last_reading": last,
        }

    def stats(self) -> dict[str, int]:
        return {
            "containers": len(self.boxes),
            "max_containers": self.max_containers,
            "readings": self.readings,
            "duplicates": self.duplicates,
            "malformed": self.malformed,
            "owner_conflicts": self.owner_conflicts,
            "evicted": self.evicted,
        }
