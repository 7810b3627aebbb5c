"""The fleet view: what the Shipping page shows of ships and ports, from `shipping.positions`,
`shipping.port-events` and `shipping.containers` (pure, no Kafka; `ShippingTail` fills it).

Owner-neutral by construction: it keeps ships, ports and counts, never a container id or an
owner in what it returns, so the open route that serves it shows nobody's boxes.

- per ship: its newest position, its track (the newest `track_len` positions by event time,
  whatever order they land in: a voyage's log arrives days late, after the live satellite
  slice), its port call (arrived, departed), the boxes aboard (those whose newest reading is
  on it at sea; kept per box internally, returned as a count), the device alarms sent live
  by satellite;
- per port: the ships alongside (arrived, not departed);
- by run: a rerun reuses the ship ids, so ships are kept per run (the event id's run part)
  and the view answers for one run, by default the newest one read; when `max_ships` is
  reached the oldest run's ships go;
- the backlog held on board: every record logged on the `onboard` channel was on board from
  its event time to its emit time (the Kafka record's CreateTime, on the run's clock), so
  hour by hour, per ship, the records waiting for the next port are known exactly once they
  landed. Live, the current voyage's are not there yet: `waiting_est` estimates them from the
  ship's onboard rate so far and the hours since its last upload.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from typing import Any

from core.contracts import topics
from core.contracts.events import SHIPPING_CONTAINER, SHIPPING_PORT_EVENT, SHIPPING_POSITION
from live.views.records import json_object
from live.views.shipping import run_of

POSITIONS_TOPIC = topics.SHIPPING_POSITIONS.name
CONTAINERS_TOPIC = topics.SHIPPING_CONTAINERS.name
PORT_EVENTS_TOPIC = topics.SHIPPING_PORT_EVENTS.name
HOUR_MS = 3_600_000


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def thin(track: list[tuple[int, float, float]], most: int = 300) -> list[list[float]]:
    """A track as [lon, lat] points, at most about `most`, the newest always in."""
    kept = track[:: max(1, len(track) // most)]
    if track and kept[-1] is not track[-1]:
        kept.append(track[-1])
    return [[lon, lat] for _, lat, lon in kept]


class Ship:
    """One ship's state as the shore knows it."""

    __slots__ = (
        "alarms",
        "arrived",
        "departed",
        "held",
        "held_hours",
        "last",
        "onboard",
        "onboard_first",
        "onboard_last",
        "port",
        "track",
        "uplink",
    )

    def __init__(self) -> None:
        self.last: dict[str, Any] | None = None  # the newest position by event time
        self.track: list[tuple[int, float, float]] = []
        self.port: str | None = None  # of the newest arrival or departure
        self.arrived: int | None = None
        self.departed: int | None = None  # None while alongside
        self.alarms = 0
        self.onboard = 0  # records logged on board (held until port)
        self.onboard_first: int | None = None
        self.onboard_last: int | None = None
        self.uplink: int | None = None  # the newest emit time of an onboard record
        self.held: defaultdict[int, int] = defaultdict(int)  # hour -> +/- (a difference array)
        self.held_hours = 0.0  # sum of (emit - event) over onboard records, hours


class ShipsView:
    """Ships and ports (see the module doc). Thread-safe: one writer, many readers."""

    def __init__(self, track_len: int = 2000, max_ships: int = 1000) -> None:
        if track_len < 2 or max_ships < 1:
            raise ValueError("track_len >= 2 and max_ships >= 1 required")
        self.track_len = track_len
        self.max_ships = max_ships
        self.ships: dict[tuple[str, str], Ship] = {}  # (run, ship id)
        self.runs: dict[str, int] = {}  # run -> ships, in the order first read
        self.boxes: dict[tuple[str, str], tuple[int, str | None]] = {}  # newest (time, ship)
        self.clocks: dict[str, int] = {}  # run -> the newest emit time seen: the run's clock
        self.malformed = 0
        self.dropped_ships = 0
        self._lock = threading.Lock()

    # -- writing -------------------------------------------------------------------------------

    def add_raw(self, topic: str, value: bytes | None, emitted_at: int | None) -> None:
        self.add(topic, json_object(value), emitted_at)

    def add(self, topic: str, record: dict[str, Any] | None, emitted_at: int | None) -> None:
        """One parsed record of `topic` (None: it was malformed)."""
        if record is None:
            self.malformed += 1
            return
        event_id = record.get("event_id")
        with self._lock:
            if emitted_at is not None and isinstance(event_id, str):
                run = run_of(event_id)
                self.clocks[run] = max(self.clocks.get(run, emitted_at), emitted_at)
            if topic == POSITIONS_TOPIC:
                self._position(record, emitted_at)
            elif topic == PORT_EVENTS_TOPIC:
                self._port_event(record)
            else:
                self._container(record, emitted_at)

    def _ship(self, r: dict[str, Any]) -> Ship | None:
        ship_id, event_id = r.get("ship_id"), r.get("event_id")
        if not isinstance(ship_id, str) or not isinstance(event_id, str):
            return None
        key = (run_of(event_id), ship_id)
        ship = self.ships.get(key)
        if ship is None:
            while len(self.ships) >= self.max_ships:
                oldest = next((run for run in self.runs if run != key[0]), None)
                if oldest is None:
                    break
                del self.runs[oldest]
                self.clocks.pop(oldest, None)
                self.boxes = {k: v for k, v in self.boxes.items() if k[0] != oldest}
                self.ships = {k: v for k, v in self.ships.items() if k[0] != oldest}
            if len(self.ships) >= self.max_ships:
                self.dropped_ships += 1
                return None
            ship = self.ships[key] = Ship()
            self.runs[key[0]] = self.runs.get(key[0], 0) + 1
        return ship

    def _onboard(self, ship: Ship, r: dict[str, Any], emitted_at: int | None) -> None:
        """A record held on board from its event time to its emit time."""
        event_time = _int(r.get("event_time"))
        if r.get("channel") != "onboard" or event_time is None or emitted_at is None:
            return
        ship.onboard += 1
        ship.onboard_first = min(ship.onboard_first or event_time, event_time)
        ship.onboard_last = max(ship.onboard_last or event_time, event_time)
        ship.uplink = max(ship.uplink or emitted_at, emitted_at)
        if emitted_at > event_time:
            ship.held[event_time // HOUR_MS] += 1
            ship.held[emitted_at // HOUR_MS] -= 1
            ship.held_hours += (emitted_at - event_time) / HOUR_MS

    def _position(self, r: dict[str, Any], emitted_at: int | None) -> None:
        lat, lon, t = _num(r.get("lat")), _num(r.get("lon")), _int(r.get("event_time"))
        if r.get("schema") != SHIPPING_POSITION.id or lat is None or lon is None or t is None:
            self.malformed += 1
            return
        ship = self._ship(r)
        if ship is None:
            return
        self._onboard(ship, r, emitted_at)
        if ship.last is None or t >= ship.last["event_time"]:
            ship.last = {
                "event_time": t,
                "lat": lat,
                "lon": lon,
                "sog_kn": _num(r.get("sog_kn")),
                "cog_deg": _num(r.get("cog_deg")),
                "nav_status": r.get("nav_status"),
                "dest_port": r.get("dest_port"),
                "voyage_id": _int(r.get("voyage_id")),
                "channel": r.get("channel"),
            }
        bisect.insort(ship.track, (t, lat, lon))
        if len(ship.track) > self.track_len:
            del ship.track[0]

    def _port_event(self, r: dict[str, Any]) -> None:
        t, kind, port = _int(r.get("event_time")), r.get("event"), r.get("port")
        if r.get("schema") != SHIPPING_PORT_EVENT.id or t is None or not isinstance(port, str):
            self.malformed += 1
            return
        ship = self._ship(r)
        if ship is None:
            return
        if kind == "arrival" and (ship.arrived is None or t >= ship.arrived):
            ship.port, ship.arrived, ship.departed = port, t, None
        elif kind == "departure" and (ship.arrived is None or t >= ship.arrived):
            ship.port, ship.departed = port, t

    def _container(self, r: dict[str, Any], emitted_at: int | None) -> None:
        box, t, event_id = r.get("container_id"), _int(r.get("event_time")), r.get("event_id")
        if (
            r.get("schema") != SHIPPING_CONTAINER.id
            or not isinstance(box, str)
            or not isinstance(event_id, str)
            or t is None
        ):
            self.malformed += 1
            return
        ship_id = r.get("ship_id") if isinstance(r.get("ship_id"), str) else None
        key = (run_of(event_id), box)
        newest = self.boxes.get(key)
        if newest is None or t >= newest[0]:  # aboard: on a ship and not in port
            self.boxes[key] = (t, ship_id if r.get("port") is None else None)
        ship = self._ship(r)
        if ship is None:
            return
        self._onboard(ship, r, emitted_at)
        if r.get("channel") == "satellite" and r.get("alarm") not in (None, "none"):
            ship.alarms += 1

    # -- reading -------------------------------------------------------------------------------

    def fleet(self, history_hours: int = 24 * 21, run: str | None = None) -> dict[str, Any]:
        """One run's ships (position, track, call, boxes aboard, backlog), ports with ships
        alongside, and the hourly backlog per ship over the last `history_hours` of the run's
        clock. `run`: None for the newest run read."""
        with self._lock:
            run = run or next(reversed(self.runs), None)
            mine = {ship_id: s for (r, ship_id), s in sorted(self.ships.items()) if r == run}
            now = self.clocks.get(run) if run is not None else None
            aboard: defaultdict[str, int] = defaultdict(int)
            for (box_run, _), (_, on) in self.boxes.items():
                if box_run == run and on is not None:
                    aboard[on] += 1
            ships = [
                self._ship_row(ship_id, s, now, aboard[ship_id]) for ship_id, s in mine.items()
            ]
            backlog = self._backlog_series(mine, history_hours)
            runs = [{"run": r, "ships": n} for r, n in reversed(self.runs.items())]
        ports: dict[str, list[str]] = defaultdict(list)
        for row in ships:
            if row["status"] == "in_port" and row["port"]:
                ports[row["port"]].append(row["ship_id"])
        return {
            "run": run,
            "runs": runs,
            "shore_now": now,
            "ships": ships,
            "ports": [
                {"port": port, "ships_in_dock": sorted(names)}
                for port, names in sorted(ports.items())
            ],
            "backlog": backlog,
        }

    def _ship_row(self, ship_id: str, s: Ship, now: int | None, aboard: int) -> dict[str, Any]:
        alongside = s.arrived is not None and s.departed is None
        moored = s.last is not None and s.last["nav_status"] == "moored"
        status = (
            "in_port"
            if alongside or (s.arrived is None and moored)
            else "at_sea"
            if s.last is not None or s.departed is not None
            else "unknown"
        )
        held_now = sum(v for h, v in s.held.items() if now is not None and h <= now // HOUR_MS)
        span_h = (
            (s.onboard_last - s.onboard_first) / HOUR_MS
            if s.onboard_first is not None and s.onboard_last is not None
            else 0.0
        )
        rate = s.onboard / span_h if span_h >= 1 else None
        since = s.uplink if s.uplink is not None else s.departed
        waiting = (
            round(rate * max(0.0, (now - since) / HOUR_MS))
            if status == "at_sea" and rate is not None and now is not None and since is not None
            else 0
            if status == "in_port"
            else None
        )
        return {
            "ship_id": ship_id,
            "status": status,
            "position": s.last,
            "track": thin(s.track),
            "port": s.port,
            "arrived_at": s.arrived,
            "departed_at": s.departed,
            "boxes_aboard": aboard,
            "satellite_alarms": s.alarms,
            "onboard_records": s.onboard,
            "held_now": max(0, held_now),
            "peak_held": max(self._prefix(s.held).values(), default=0),
            "mean_delay_h": round(s.held_hours / s.onboard, 1) if s.onboard else None,
            "last_upload": s.uplink,
            "waiting_est": waiting,
        }

    @staticmethod
    def _prefix(diff: dict[int, int]) -> dict[int, int]:
        """hour -> records held on board then (a running sum of the difference array)."""
        out: dict[int, int] = {}
        total = 0
        for hour in sorted(diff):
            total += diff[hour]
            out[hour] = total
        return out

    def _backlog_series(self, ships: dict[str, Ship], history_hours: int) -> list[dict[str, Any]]:
        """Per ship, the records held on board at each hour where it changed (step points)."""
        rows: list[dict[str, Any]] = []
        for ship_id, s in ships.items():
            steps = self._prefix(s.held)
            if not steps:
                continue
            start = max(steps) - history_hours
            rows += [
                {"ship_id": ship_id, "time": hour * HOUR_MS, "held": held}
                for hour, held in steps.items()
                if hour >= start
            ]
        return rows

    def stats(self) -> dict[str, int]:
        return {
            "ships": len(self.ships),
            "runs": len(self.runs),
            "malformed": self.malformed,
            "dropped": self.dropped_ships,
        }
