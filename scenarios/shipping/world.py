"""The shipping world, stepped as one SimPy cohort: ships, the containers on them, the ports.

Ships (Python per ship: a fleet is tens of ships) sail their service's loop on searoute lanes at
a drawn speed, dwell alongside, and log a position every `position_interval_s`. Containers (numpy
over all of them) report every logger period while on a ship or in a terminal yard; delivered
boxes go away for a turnaround and report nothing. Cargo operations at a call (unloads, then
loads) are port events at their own times.

Connectivity is the point of the scenario: what is logged at sea is held on board until the
ship's ship-to-shore link comes up in the next port (`offline_until` = that uplink time), so the
engine's store-and-forward model holds it and flushes the voyage in bulk, days late. The
satellite slice (a position every few hours, container alarms) goes live.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from core.contracts.events import PORT_EVENT_KINDS, SHIPPING_ALARMS, SHIPPING_CHANNELS
from scenarios.shipping.config import HARD_NEGATIVES, SHIPPING_INCIDENTS, ShippingDomain
from scenarios.shipping.lanes import Lane, Port, lane, offset
from simulators.intervals import IdCounter
from simulators.records import NO_ID, Readings

H_MS = 3_600_000.0
NEVER = float(np.finfo(np.float64).max)
# row kinds (payload column `rk`): what template the encoder uses
POSITION, REEFER, DRY, CALL, CARGO = range(5)
# container states
AWAY, ON_SHIP, IN_YARD, LOST = range(4)
# port event kinds
ARRIVAL, DEPARTURE, LOADED, UNLOADED = range(4)
EVENT_KINDS = PORT_EVENT_KINDS
CHANNELS = SHIPPING_CHANNELS
ONBOARD, SATELLITE, SHORE = range(3)
ALARMS = SHIPPING_ALARMS
REEFER_FAIL, LOST_OVERBOARD, DOOR_TAMPER, MISSED_UNLOAD, ROUTE_DEVIATION = (
    SHIPPING_INCIDENTS.index(x) + 1 for x in SHIPPING_INCIDENTS
)
DEFROST, DOOR_IN_PORT, TRANSSHIP, WEATHER, HANDLING = (
    HARD_NEGATIVES.index(x) + 1 for x in HARD_NEGATIVES
)
REEFER_CARGO = {  # cargo: setpoint range in C
    "frozen_fish": (-25.0, -18.0),
    "frozen_meat": (-22.0, -18.0),
    "bananas": (13.0, 14.0),
    "pharma": (2.0, 8.0),
    "dairy": (1.0, 4.0),
    "fresh_produce": (0.0, 6.0),
}
DRY_CARGO = ("toys", "electronics", "textiles", "machinery", "furniture")
CARGO_TYPES = (*REEFER_CARGO, *DRY_CARGO)
DEVIATION_KN = 12.0  # speed when leaving the lane or coming back


@dataclass
class Leg:
    """One passage: progress along the lane and a lateral offset, both piecewise linear."""

    lane: Lane
    dest: int
    dep_ms: float
    arr_ms: float
    uplink_ms: float
    speed_kn: float
    t_knots: np.ndarray
    s_knots: np.ndarray
    o_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    o_nm: np.ndarray = field(default_factory=lambda: np.zeros(0))
    dev: tuple[float, float, float, float] | None = None  # start, out, loiter end, back
    dev_incident: int = NO_ID
    weather: tuple[float, float] | None = None


class ShippingWorld:
    def __init__(
        self,
        d: ShippingDomain,
        n_ships: int,
        n_containers: int,
        ports: list[Port],
        start_ms: int,
        rng: np.random.Generator,
    ) -> None:
        self.d, self.rng = d, rng
        self.S, self.C, self.P = n_ships, n_containers, len(ports)
        self.ports = ports
        self.port_index = {p.code: i for i, p in enumerate(ports)}
        self.port_lat = np.array([p.lat for p in ports])
        self.port_lon = np.array([p.lon for p in ports])
        self.hub = np.zeros(self.P, dtype=bool)
        for h in d.hubs:
            self.hub[self.port_index[h]] = True
        self.rotations = [[self.port_index[c] for c in s.rotation] for s in d.services]
        self.on_service = [set(r) for r in self.rotations]
        self.incidents = IdCounter()
        # cargo moves: (t, order, kind, box, ship, port)
        self.ops: list[tuple[float, int, int, int, int, int]] = []
        self._op_order = 0
        v = d.voyages
        # ships
        S = n_ships
        self.svc = np.arange(S) % len(self.rotations)
        self.speed = v.speed_kn.sample(rng, S)
        self.rot_pos = np.array([rng.integers(len(self.rotations[s])) for s in self.svc])
        self.in_port = np.zeros(S, dtype=bool)
        self.port_dep = np.zeros(S)  # departure time when alongside
        self.port_arr = np.zeros(S)
        self.legs: list[Leg | None] = [None] * S
        self.leg_dep = np.full(S, NEVER)  # the current or last leg, as arrays for the boxes
        self.leg_arr = np.full(S, -NEVER)
        self.leg_uplink = np.zeros(S)
        self.leg_from = np.full(S, -1, dtype=np.int64)  # the port the current leg left
        self.at_port = np.array(  # the current or last call
            [self.rotations[self.svc[k]][self.rot_pos[k]] for k in range(S)], dtype=np.int64
        )
        self.voyage = np.arange(S, dtype=np.int64) * 100_000
        self.pos_next = start_ms + rng.uniform(0, v.position_interval_s * 1000, S)
        sat_ms = d.satellite.position_every_h * H_MS
        self.sat_next = start_ms + rng.uniform(0, sat_ms, S)
        self.lat = np.zeros(S)
        self.lon = np.zeros(S)
        self.slots = np.floor(d.capacity * v.load_factor.sample(rng, S)).astype(np.int64)
        # containers
        C, c = n_containers, d.containers
        self.state = np.full(C, AWAY, dtype=np.int8)
        self.ship = np.full(C, -1, dtype=np.int64)
        self.where = np.full(C, -1, dtype=np.int64)  # yard port or port of delivery
        self.disch = np.full(C, -1, dtype=np.int64)
        self.final = np.full(C, -1, dtype=np.int64)
        self.reserved = np.zeros(C, dtype=bool)
        self.avail = np.zeros(C)
        self.owner = rng.integers(len(d.owners), size=C)
        self.reefer = rng.random(C) < c.reefer_share
        n_reefer_kinds = len(REEFER_CARGO)
        self.cargo = np.where(
            self.reefer,
            rng.integers(n_reefer_kinds, size=C),
            n_reefer_kinds + rng.integers(len(DRY_CARGO), size=C),
        )
        lo = np.array([r[0] for r in REEFER_CARGO.values()])
        hi = np.array([r[1] for r in REEFER_CARGO.values()])
        k = np.minimum(self.cargo, n_reefer_kinds - 1)
        self.setpoint = np.round(rng.uniform(lo[k], hi[k]) * 2) / 2
        self.interval = np.where(self.reefer, c.reefer_interval_s, c.dry_interval_s) * 1000
        self.next_ms = start_ms + rng.uniform(0, 1, C) * self.interval
        self.kw = c.power_kw.sample(rng, C)
        self.d_per = c.defrost_every_h.sample(rng, C) * H_MS
        self.d_dur = c.defrost_min.sample(rng, C) * 60_000
        self.d_rise = c.defrost_rise_c.sample(rng, C)
        self.d_phase = start_ms - rng.uniform(0, 1, C) * self.d_per
        self.handled = np.full(C, -NEVER)
        # one incident at a time per container
        self.inc_label = np.zeros(C, dtype=np.int16)
        self.inc_id = np.full(C, NO_ID, dtype=np.int64)
        self.inc_from = np.full(C, NEVER)
        self.inc_to = np.full(C, -NEVER)
        self.fail_from = np.full(C, NEVER)
        self.fail_to = np.full(C, -NEVER)
        self.fail_tau = np.ones(C)
        self.fan_kw = d.incidents.fan_kw.sample(rng, C)
        self.door_from = np.full(C, NEVER)
        self.door_to = np.full(C, NEVER)
        self.lost_at = np.full(C, NEVER)
        self.lost_shock = np.zeros(C)
        self._place(float(start_ms))

    # -- the world at the start ----------------------------------------------------------------

    def _place(self, t0: float) -> None:
        rng, v = self.rng, self.d.voyages
        boxes = rng.permutation(self.C).tolist()
        for i in range(self.S):
            rot = self.rotations[self.svc[i]]
            here = rot[self.rot_pos[i]]
            onboard = boxes[: int(self.slots[i])]
            boxes = boxes[len(onboard) :]
            for b in onboard:
                self._book(b, i, here, load=True)
                self.state[b] = ON_SHIP
                self.ship[b] = i
            if rng.random() < 0.3:  # alongside at the start
                dwell = float(v.dwell_h.sample(rng, 1)[0]) * H_MS
                self.in_port[i] = True
                self.port_arr[i] = t0 - rng.uniform(0, 0.5) * dwell
                self.port_dep[i] = self.port_arr[i] + dwell
                self.lat[i], self.lon[i] = self.port_lat[here], self.port_lon[here]
            else:  # somewhere on the way to the next call
                self._depart(i, t0, emit=None, progress=rng.uniform(0.05, 0.9))
        rest = np.array(boxes, dtype=np.int64)
        if rest.size:  # the rest are away, back at some port soon
            self.where[rest] = rng.integers(self.P, size=rest.size)
            self.avail[rest] = t0 + rng.uniform(0, 3, rest.size) * 24 * H_MS

    def _book(self, b: int, ship: int, here: int, load: bool) -> None:
        """A booking for box b loading on `ship` at `here`: its final port and where it leaves
        this ship (the final port, or a hub on the way for a port off the loop)."""
        rng = self.rng
        rot = self.rotations[self.svc[ship]]
        k = rot.index(here) if here in rot else 0
        ahead = [rot[(k + j) % len(rot)] for j in range(1, len(rot))]
        ahead = [p for p in dict.fromkeys(ahead) if p != here]
        hubs = [p for p in ahead if self.hub[p]]
        off_loop = [p for p in range(self.P) if p not in self.on_service[self.svc[ship]]]
        if hubs and off_loop and rng.random() < self.d.voyages.transship_share:
            self.final[b] = off_loop[int(rng.integers(len(off_loop)))]
            self.disch[b] = hubs[int(rng.integers(len(hubs)))]
        else:
            self.final[b] = ahead[int(rng.integers(len(ahead)))]
            self.disch[b] = self.final[b]

    # -- ships ---------------------------------------------------------------------------------

    def _depart(
        self, i: int, t: float, emit: list[dict[str, np.ndarray]] | None, progress: float = 0.0
    ) -> None:
        """Sail from the current call to the next; `progress` > 0: at the start of the run,
        that share of the passage is already behind (the departure was before `t`)."""
        rng, d, inc = self.rng, self.d, self.d.incidents
        rot = self.rotations[self.svc[i]]
        here = rot[self.rot_pos[i]]
        nxt_pos = (self.rot_pos[i] + 1) % len(rot)
        dest = rot[nxt_pos]
        ln = lane(self.ports[here].code, self.ports[dest].code)
        speed = float(np.clip(d.voyages.speed_kn.sample(rng, 1)[0], 8.0, 26.0))
        base = ln.length_nm / speed * H_MS
        t -= progress * base
        t_k, s_k = [t], [0.0]
        leg = Leg(ln, dest, t, t + base, 0.0, speed, np.zeros(0), np.zeros(0))
        # incidents only on passages that start in the run (none half before its start)
        long_enough = base >= inc.min_leg_h * H_MS and progress == 0.0
        roll = rng.random(3)
        side = 1.0 if roll[2] < 0.5 else -1.0
        if long_enough and roll[0] < inc.route_deviation:
            f = rng.uniform(0.25, 0.65)
            dist = float(inc.deviation_nm.sample(rng, 1)[0])
            out = dist / DEVIATION_KN * H_MS
            loiter = float(inc.loiter_h.sample(rng, 1)[0]) * H_MS
            t0 = t + f * base
            t_k += [t0, t0 + 2 * out + loiter]
            s_k += [f * ln.length_nm, f * ln.length_nm]
            leg.dev = (t0, t0 + out, t0 + out + loiter, t0 + 2 * out + loiter)
            leg.dev_incident = int(self.incidents.take(1)[0])
            leg.o_t = np.array(leg.dev)
            leg.o_nm = np.array([0.0, dist, dist, 0.0]) * side
            extra = 2 * out + loiter
        elif long_enough and roll[1] < inc.weather_routing:
            width = min(rng.uniform(24.0, 72.0) * H_MS, 0.6 * base)
            w0 = t + rng.uniform(0.1, 0.9) * (base - width)
            amp = float(inc.detour_nm.sample(rng, 1)[0])
            leg.weather = (w0, w0 + width)
            leg.o_t = np.array([w0, w0 + width / 3, w0 + 2 * width / 3, w0 + width])
            leg.o_nm = np.array([0.0, amp, amp, 0.0]) * side
            extra = 0.0
        else:
            extra = 0.0
        leg.arr_ms = t + base + extra
        t_k.append(leg.arr_ms)
        s_k.append(ln.length_nm)
        leg.t_knots, leg.s_knots = np.array(t_k), np.array(s_k)
        leg.uplink_ms = leg.arr_ms + float(d.voyages.uplink_min.sample(rng, 1)[0]) * 60_000
        self.legs[i] = leg
        self.leg_dep[i], self.leg_arr[i], self.leg_uplink[i] = t, leg.arr_ms, leg.uplink_ms
        self.at_port[i], self.leg_from[i] = dest, here
        self.in_port[i] = False
        self.rot_pos[i] = nxt_pos
        self.voyage[i] += 1
        if emit is not None:
            emit.append(self._call_event(i, here, t, DEPARTURE))
        self._container_incidents(i, leg, long_enough)

    def _container_incidents(self, i: int, leg: Leg, long_enough: bool) -> None:
        if not long_enough:
            return
        rng, inc = self.rng, self.d.incidents
        dur = leg.arr_ms - leg.dep_ms
        aboard = np.flatnonzero((self.state == ON_SHIP) & (self.ship == i))
        free = aboard[self.inc_label[aboard] == 0]
        if free.size == 0:
            return
        u = rng.random(free.size)
        at = leg.dep_ms + rng.uniform(0.15, 0.75, free.size) * dur
        fail = free[self.reefer[free] & (u < inc.reefer_failure)]
        if fail.size:
            t0 = at[np.isin(free, fail)]
            self.fail_from[fail], self.fail_to[fail] = t0, leg.arr_ms + 2 * H_MS
            self.fail_tau[fail] = inc.failure_tau_h.sample(rng, fail.size) * H_MS
            self._label(fail, REEFER_FAIL, t0, self.fail_to[fail], self.incidents.take(fail.size))
        u2 = rng.random(free.size)
        tamper = free[(u2 < inc.door_tamper) & (self.inc_label[free] == 0)]
        if tamper.size:
            t0 = at[np.isin(free, tamper)]
            t1 = t0 + inc.tamper_min.sample(rng, tamper.size) * 60_000
            self.door_from[tamper], self.door_to[tamper] = t0, t1
            self._label(tamper, DOOR_TAMPER, t0, t1 + 1, self.incidents.take(tamper.size))
        if rng.random() < inc.lost_overboard:
            pool = free[self.inc_label[free] == 0]
            lo, hi = inc.boxes_lost
            k = min(int(rng.integers(lo, hi + 1)), pool.size)
            if k:
                lost = rng.choice(pool, size=k, replace=False)
                t0 = leg.dep_ms + rng.uniform(0.2, 0.8) * dur
                self.lost_at[lost] = t0
                self.lost_shock[lost] = inc.overboard_shock_g.sample(rng, k)
                ids = np.full(k, self.incidents.take(1)[0])
                self._label(
                    lost, LOST_OVERBOARD, np.full(k, t0 - 2 * H_MS), np.full(k, t0 + 1), ids
                )

    def _label(
        self, b: np.ndarray, label: int, t0: np.ndarray, t1: np.ndarray, ids: np.ndarray
    ) -> None:
        self.inc_label[b], self.inc_id[b] = label, ids
        self.inc_from[b], self.inc_to[b] = t0, t1

    def _arrive(self, i: int, emit: list[dict[str, np.ndarray]]) -> None:
        leg = self.legs[i]
        assert leg is not None
        rng, v = self.rng, self.d.voyages
        t, p = leg.arr_ms, leg.dest
        self.in_port[i] = True
        self.port_arr[i] = t
        dwell = float(np.clip(v.dwell_h.sample(rng, 1)[0], 6.0, 96.0)) * H_MS
        self.port_dep[i] = t + dwell
        self.lat[i], self.lon[i] = self.port_lat[p], self.port_lon[p]
        emit.append(self._call_event(i, p, t, ARRIVAL))
        # repairs: a failed unit is fixed once alongside (its label ends at fail_to)
        aboard = np.flatnonzero((self.state == ON_SHIP) & (self.ship == i))
        # missed unloads of earlier calls end here: they come off now
        late = aboard[(self.inc_label[aboard] == MISSED_UNLOAD)]
        self.disch[late] = p
        due = aboard[self.disch[aboard] == p]
        fresh = due[self.inc_label[due] != MISSED_UNLOAD]
        missed = fresh[rng.random(fresh.size) < self.d.incidents.missed_unload]
        if missed.size:
            missed = missed[self.inc_label[missed] == 0]
            self._label(
                missed,
                MISSED_UNLOAD,
                np.full(missed.size, self.port_dep[i]),
                np.full(missed.size, NEVER),
                self.incidents.take(missed.size),
            )
            # the booking still says this port: on board past it, that is what shows
        unload = due[~np.isin(due, missed)]
        t_un = t + rng.uniform(1.0 * H_MS, 0.45 * dwell, unload.size)
        for b, tu in zip(unload.tolist(), t_un.tolist(), strict=True):
            self._op(tu, UNLOADED, b, i, p)
        # loading: boxes waiting in the yard for this loop, then new bookings from boxes back
        keep = int(aboard.size - unload.size)
        room = max(int(self.slots[i]) - keep, 0)
        svc = self.on_service[self.svc[i]]
        waiting = np.flatnonzero(
            (self.state == IN_YARD) & (self.where == p) & ~self.reserved & (self.final != p)
        )
        waiting = np.array([b for b in waiting.tolist() if self.final[b] in svc], dtype=np.int64)
        back = np.flatnonzero(
            (self.state == AWAY) & (self.where == p) & (self.avail <= t) & ~self.reserved
        )
        load = np.r_[waiting, back][:room]
        t_ld = t + rng.uniform(0.5 * dwell, dwell - 0.5 * H_MS, load.size)
        for b, tl in zip(load.tolist(), t_ld.tolist(), strict=True):
            self.reserved[b] = True
            if self.state[b] == AWAY:  # gate-in: it reports from the yard from now on
                self._book(b, i, p, load=True)
                self.state[b] = IN_YARD
                self.next_ms[b] = t + rng.uniform(0, 1) * self.interval[b]
                self._door_in_port(b, t, tl)
            else:
                rot = self.rotations[self.svc[i]]
                self.disch[b] = self.final[b]
                if self.final[b] not in rot:
                    self.disch[b] = p
            self._op(tl, LOADED, b, i, p)

    def _door_in_port(self, b: int, t0: float, t1: float) -> None:
        """A customs inspection: the door opens for a while during the stay in port."""
        c = self.d.containers
        if t1 - t0 > H_MS and self.inc_label[b] == 0 and self.rng.random() < c.port_inspection:
            start = t0 + self.rng.uniform(0, 1) * (t1 - t0 - H_MS)
            length = float(c.inspection_min.sample(self.rng, 1)[0]) * 60_000
            self.door_from[b], self.door_to[b] = start, min(start + length, t1 - 60_000)

    def _op(self, t: float, kind: int, b: int, ship: int, port: int) -> None:
        self._op_order += 1
        heapq.heappush(self.ops, (t, self._op_order, kind, b, ship, port))

    def _apply_ops(self, t1: float, emit: list[dict[str, np.ndarray]]) -> None:
        rows: list[tuple[float, int, int, int, int]] = []
        while self.ops and self.ops[0][0] < t1:
            t, _, kind, b, i, p = heapq.heappop(self.ops)
            rows.append((t, kind, b, i, 0))
            if kind == UNLOADED:
                if self.inc_label[b] == MISSED_UNLOAD:
                    self.inc_to[b] = t
                self.ship[b] = -1
                self.where[b] = p
                if self.final[b] == p:  # delivered: away until it is back empty
                    self.state[b] = AWAY
                    self.avail[b] = (
                        t + float(self.d.containers.turnaround_d.sample(self.rng, 1)[0]) * 24 * H_MS
                    )
                else:
                    self.state[b] = IN_YARD
                    self._door_in_port(b, t, t + 12 * H_MS)
            else:
                self.state[b] = ON_SHIP
                self.ship[b] = i
                self.reserved[b] = False
            self.handled[b] = t
            rows[-1] = (t, kind, b, i, p)
        if rows:
            t_a = np.array([r[0] for r in rows])
            kind_a = np.array([r[1] for r in rows], dtype=np.int32)
            box = np.array([r[2] for r in rows], dtype=np.int64)
            ship = np.array([r[3] for r in rows], dtype=np.int64)
            port = np.array([r[4] for r in rows], dtype=np.int64)
            emit.append(self._port_rows(t_a, kind_a, ship, port, box, CARGO))

    def _call_event(self, i: int, p: int, t: float, kind: int) -> dict[str, np.ndarray]:
        return self._port_rows(
            np.array([t]),
            np.array([kind], dtype=np.int32),
            np.array([i]),
            np.array([p]),
            np.array([-1]),
            CALL,
        )

    def _port_rows(
        self,
        t: np.ndarray,
        kind: np.ndarray,
        ship: np.ndarray,
        port: np.ndarray,
        box: np.ndarray,
        rk: int,
    ) -> dict[str, np.ndarray]:
        n = t.shape[0]
        b = np.maximum(box, 0)
        return {
            "ent": (self.S + self.C + port).astype(np.int32),
            "t": t,
            "rk": np.full(n, rk, dtype=np.int32),
            "ev": kind,
            "ship": ship.astype(np.int32),
            "port": port.astype(np.int32),
            "box": box.astype(np.int32),
            "voyage": self.voyage[ship],
            "owner": np.where(box >= 0, self.owner[b], -1).astype(np.int32),
            "cargo": np.where(box >= 0, self.cargo[b], -1).astype(np.int32),
            "channel": np.full(n, SHORE, dtype=np.int32),
            "hard_negative": np.where(
                (box >= 0) & (self.final[b] != port) & (kind == UNLOADED), TRANSSHIP, 0
            ),
        }

    def _position(self, i: int, t: float, out: list[tuple[float, ...]]) -> None:
        """Ship i's position at t, logged on board (row tuple appended to `out`)."""
        rng, v, sat = self.rng, self.d.voyages, self.d.satellite
        leg = self.legs[i]
        label, inc, mark = 0, NO_ID, 0
        if self.in_port[i] or leg is None:
            p = self.rotations[self.svc[i]][self.rot_pos[i]]
            lat, lon, sog, cog, nav, dest = self.port_lat[p], self.port_lon[p], 0.0, 0.0, 1, p
            offline: float = NO_ID
            channel = SHORE
        else:
            s = float(np.interp(t, leg.t_knots, leg.s_knots))
            la, lo, hd = leg.lane.at(np.array([s]))
            cog = float(hd[0])
            sog = leg.speed_kn + rng.normal(0, v.speed_noise_kn)
            lat, lon = float(la[0]), float(lo[0])
            if leg.o_t.size:
                off = float(np.interp(t, leg.o_t, leg.o_nm))
                if off:
                    la2, lo2 = offset(la, lo, hd, np.array([off]))
                    lat, lon = float(la2[0]), float(lo2[0])
            if leg.dev is not None and leg.dev[0] <= t < leg.dev[3]:
                label, inc = ROUTE_DEVIATION, leg.dev_incident
                away = 1.0 if leg.o_nm[1] > 0 else -1.0
                if t < leg.dev[1]:
                    sog, cog = DEVIATION_KN, (cog + 90 * away) % 360
                elif t < leg.dev[2]:
                    sog, cog = rng.uniform(0.0, 2.0), rng.uniform(0.0, 360.0)
                else:
                    sog, cog = DEVIATION_KN, (cog - 90 * away) % 360
            elif leg.weather is not None and leg.weather[0] <= t < leg.weather[1]:
                mark = WEATHER
            nav, dest = 0, leg.dest
            offline, channel = leg.uplink_ms, ONBOARD
            if sat.enabled and t >= self.sat_next[i]:
                offline, channel = float(NO_ID), SATELLITE
                self.sat_next[i] = t + sat.position_every_h * H_MS
        self.lat[i], self.lon[i] = lat, lon
        out.append(
            (i, t, label, inc, lat, lon, max(sog, 0.0), cog, nav, dest, offline, channel, mark)
        )

    # -- one step --------------------------------------------------------------------------------

    def readings(self, t0_ms: int, t1_ms: int) -> Readings | None:
        t1 = float(t1_ms)
        port_parts: list[dict[str, np.ndarray]] = []
        positions: list[tuple[float, ...]] = []
        step = self.d.voyages.position_interval_s * 1000
        for i in range(self.S):
            while True:
                leg = self.legs[i]
                change = self.port_dep[i] if self.in_port[i] else (leg.arr_ms if leg else NEVER)
                if self.pos_next[i] < t1 and self.pos_next[i] <= change:
                    self._position(i, float(self.pos_next[i]), positions)
                    self.pos_next[i] += step
                elif change < t1:
                    if self.in_port[i]:
                        self._apply_ops(change, port_parts)  # its cargo moves first
                        self._depart(i, change, port_parts)
                    else:
                        self._arrive(i, port_parts)
                else:
                    break
        self._apply_ops(t1, port_parts)
        parts = [self._containers(t0_ms, t1)]
        if positions:
            parts.append(self._position_rows(positions))
        parts += port_parts
        parts = [p for p in parts if p["t"].shape[0]]
        if not parts:
            return None
        return self._readings(parts)

    def _position_rows(self, rows: list[tuple[float, ...]]) -> dict[str, np.ndarray]:
        a = np.array(rows, dtype=np.float64)
        i = a[:, 0].astype(np.int64)
        return {
            "ent": i.astype(np.int32),
            "t": a[:, 1],
            "label": a[:, 2].astype(np.int16),
            "incident": a[:, 3].astype(np.int64),
            "lat": a[:, 4],
            "lon": a[:, 5],
            "sog": a[:, 6],
            "cog": a[:, 7],
            "nav": a[:, 8].astype(np.int32),
            "port": a[:, 9].astype(np.int32),
            "offline": a[:, 10],
            "channel": a[:, 11].astype(np.int32),
            "hard_negative": a[:, 12].astype(np.int64),
            "rk": np.full(i.size, POSITION, dtype=np.int32),
            "ship": i.astype(np.int32),
            "voyage": self.voyage[i],
        }

    def _containers(self, t0_ms: int, t1: float) -> dict[str, np.ndarray]:
        """Regular logger readings, and the extra ones a door or a loss triggers."""
        live = (self.state == ON_SHIP) | (self.state == IN_YARD)
        boxes, times = [], []
        while True:  # a step may hold several logger periods
            due = np.flatnonzero(live & (self.next_ms < t1))
            if due.size == 0:
                break
            boxes.append(due)
            times.append(self.next_ms[due].copy())
            self.next_ms[due] += self.interval[due]
        due = np.concatenate(boxes) if boxes else np.zeros(0, dtype=np.int64)
        t_due = np.concatenate(times) if times else np.zeros(0)
        before_loss = t_due < self.lost_at[due]  # a box lost this step says nothing after
        due, t_due = due[before_loss], t_due[before_loss]
        extra_b, extra_t, kinds = [], [], []
        for arr, kind in ((self.door_from, 1), (self.door_to, 2), (self.lost_at, 3)):
            hit = np.flatnonzero(live & (arr >= t0_ms) & (arr < t1))
            extra_b.append(hit)
            extra_t.append(arr[hit])
            kinds.append(np.full(hit.size, kind))
        b = np.r_[due, *extra_b].astype(np.int64)
        t = np.r_[t_due, *extra_t]
        why = np.r_[np.zeros(due.size), *kinds]
        lost_now = b[why == 3]
        if lost_now.size:  # nothing more from them after this reading
            self.state[lost_now] = LOST
        return self._container_rows(b, t, why)

    def _container_rows(
        self, b: np.ndarray, t: np.ndarray, why: np.ndarray
    ) -> dict[str, np.ndarray]:
        rng, c, n = self.rng, self.d.containers, b.size
        ship = self.ship[b]
        on_ship = ship >= 0
        s = np.maximum(ship, 0)
        in_port = ~on_ship | self.in_port[s]
        dep, arr, upl = self.leg_dep[s], self.leg_arr[s], self.leg_uplink[s]
        at_sea = on_ship & (dep <= t) & (t < arr)
        lat = np.where(on_ship, self.lat[s], self.port_lat[np.maximum(self.where[b], 0)])
        ambient = 30.0 - 0.35 * np.abs(lat) + rng.normal(0, 1.0, n)
        reefer = self.reefer[b]
        sp = self.setpoint[b]
        ph = np.mod(t - self.d_phase[b], self.d_per[b])
        failing = (self.fail_from[b] <= t) & (t < self.fail_to[b])
        defrost = reefer & (ph < self.d_dur[b]) & ~failing
        bump = np.where(defrost, self.d_rise[b] * np.sin(np.pi * ph / self.d_dur[b]), 0.0)
        drift = np.exp(-np.maximum(t - self.fail_from[b], 0.0) / self.fail_tau[b])
        temp = np.where(failing, ambient + (sp - ambient) * drift, sp + bump)
        temp = temp + rng.normal(0, c.temp_noise_c, n)
        kw = self.kw[b] * (1 + rng.normal(0, 0.12, n))
        power = np.where(
            failing,
            self.fan_kw[b] + rng.normal(0, 0.05, n),
            np.where(defrost, 0.55 * self.kw[b], kw),
        )
        door = (self.door_from[b] <= t) & (t < self.door_to[b]) | (why == 1)
        door &= why != 2
        handled = (t - self.handled[b]) < self.interval[b]
        shock = np.where(
            in_port & ~at_sea,
            rng.uniform(0.02, 0.3, n),
            c.sea_shock_g.sample(rng, n),
        )
        shock = np.where(handled, c.handling_shock_g.sample(rng, n), shock)
        shock = np.where(why == 3, self.lost_shock[b], shock)
        alarm = np.where(reefer & ~defrost & (np.abs(temp - sp) > c.alarm_band_c), 1, 0)
        alarm = np.where(door & at_sea, 2, alarm)
        alarm = np.where(shock > c.shock_alarm_g, 3, alarm)
        labelled = (self.inc_from[b] <= t) & (t < self.inc_to[b])
        label = np.where(labelled, self.inc_label[b], 0).astype(np.int16)
        incident = np.where(labelled, self.inc_id[b], NO_ID)
        yard_hub = (self.state[b] == IN_YARD) & self.hub[np.maximum(self.where[b], 0)]
        yard_hub &= self.final[b] != self.where[b]
        mark = np.zeros(n, dtype=np.int64)
        mark = np.where(handled, HANDLING, mark)
        mark = np.where(yard_hub, TRANSSHIP, mark)
        mark = np.where(door & ~at_sea, DOOR_IN_PORT, mark)
        mark = np.where(defrost, DEFROST, mark)
        mark = np.where(label == 0, mark, 0)
        sat = self.d.satellite
        live_alarm = sat.enabled and sat.alarms
        offline = np.where(at_sea, upl, NO_ID)
        channel = np.where(at_sea, ONBOARD, SHORE)
        if live_alarm:
            sent = at_sea & (alarm > 0)
            offline = np.where(sent, NO_ID, offline)
            channel = np.where(sent, SATELLITE, channel)
        alongside = np.where(t < dep, self.leg_from[s], self.at_port[s])  # before it sailed
        port_here = np.where(on_ship, np.where(at_sea, -1, alongside), self.where[b])
        return {
            "ent": (self.S + b).astype(np.int32),
            "t": t,
            "label": label,
            "incident": incident,
            "rk": np.where(reefer, REEFER, DRY).astype(np.int32),
            "ship": ship.astype(np.int32),
            "port": port_here.astype(np.int32),
            "voyage": np.where(on_ship, self.voyage[s], -1),
            "owner": self.owner[b].astype(np.int32),
            "cargo": self.cargo[b].astype(np.int32),
            "disch": self.disch[b].astype(np.int32),
            "final": self.final[b].astype(np.int32),
            "setpoint": sp,
            "temp": temp,
            "power": np.maximum(power, 0.0),
            "door": door.astype(np.int64),
            "shock": shock,
            "alarm": alarm.astype(np.int32),
            "channel": channel.astype(np.int32),
            "offline": offline.astype(np.float64),
            "hard_negative": mark,
        }

    def _readings(self, parts: list[dict[str, np.ndarray]]) -> Readings:
        n = sum(p["t"].shape[0] for p in parts)
        ent = np.concatenate([p["ent"] for p in parts])
        t = np.floor(np.concatenate([p["t"] for p in parts])).astype(np.int64)

        def col(name: str, dtype: str, fill: float) -> np.ndarray:
            return np.concatenate(
                [
                    p[name].astype(dtype) if name in p else np.full(p["t"].shape[0], fill, dtype)
                    for p in parts
                ]
            )

        payload = {name: col(name, dt, fill) for name, dt, fill in PAYLOAD_COLUMNS}
        offline = col("offline", "f8", NO_ID)
        until = np.where(offline > t, np.ceil(offline), NO_ID).astype(np.int64)
        assert payload["rk"].shape[0] == n
        return Readings(
            ent=ent,
            true_ms=t,
            label=col("label", "i2", 0),
            incident=col("incident", "i8", NO_ID),
            payload=payload,
            offline_until=until,
        )


# name, dtype, fill for rows that do not have it
PAYLOAD_COLUMNS: tuple[tuple[str, str, float], ...] = (
    ("rk", "i4", 0),
    ("voyage", "i8", -1),
    ("lat", "f8", 0.0),
    ("lon", "f8", 0.0),
    ("sog", "f8", 0.0),
    ("cog", "f8", 0.0),
    ("nav", "i4", 0),
    ("channel", "i4", 0),
    ("port", "i4", -1),
    ("ship", "i4", -1),
    ("box", "i4", -1),
    ("ev", "i4", 0),
    ("owner", "i4", -1),
    ("cargo", "i4", -1),
    ("disch", "i4", -1),
    ("final", "i4", -1),
    ("setpoint", "f8", 0.0),
    ("temp", "f8", 0.0),
    ("power", "f8", 0.0),
    ("door", "i8", 0),
    ("shock", "f8", 0.0),
    ("alarm", "i4", 0),
    ("hard_negative", "i8", 0),
)
