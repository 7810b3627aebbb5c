"""Event serialisation for the three shipping streams: one bytes template per row kind (ship
position, reefer reading, dry-box reading, port call, cargo move), filled from columns as the
engine's `EventEncoder` does; fields a kind does not have are JSON null.
"""

from __future__ import annotations

import numpy as np

from scenarios.shipping.topics import CONTAINER_SCHEMA, PORT_EVENT_SCHEMA, POSITION_SCHEMA
from scenarios.shipping.world import (
    ALARMS,
    CALL,
    CARGO,
    CHANNELS,
    DRY,
    EVENT_KINDS,
    POSITION,
    REEFER,
)
from simulators.encoding import FixedDecimals, json_bytes, string_table
from simulators.entities import EntityTable
from simulators.records import take

NULL = b"null"


def _nullable(values: list[str]) -> np.ndarray:
    """JSON literals by index, with null at index -1."""
    return np.array([*(json_bytes(v) for v in values), NULL], dtype=object)


class ShippingEncoder:
    def __init__(
        self,
        id_prefix: str,
        table: EntityTable,
        ship_ids: list[str],
        container_ids: list[str],
        port_codes: list[str],
        owners: list[str],
        cargo: tuple[str, ...],
    ) -> None:
        head = b'{"schema":%s,"event_id":"' + id_prefix.encode() + b'%%x",%s:%%s,'
        head += b'"event_time":%%d,"seq":%%d'

        def start(schema: str, key: str) -> bytes:
            return head % (json_bytes(schema), json_bytes(key))

        container = (
            b',"ship_id":%s,"voyage_id":%s,"port":%s,"owner":%s,"cargo":%s,'
            b'"discharge_port":%s,"final_port":%s,'
        )
        sensors = b'"door_open":%s,"shock_g":%s,"alarm":%s,"channel":%s}'
        port = b',"event":%s,"ship_id":%s,"voyage_id":%d,'
        self.templates = {
            POSITION: start(POSITION_SCHEMA, "ship_id")
            + b',"voyage_id":%d,"lat":%s,"lon":%s,"sog_kn":%s,"cog_deg":%s,"nav_status":%s,'
            b'"dest_port":%s,"channel":%s}',
            REEFER: start(CONTAINER_SCHEMA, "container_id")
            + container
            + b'"reefer":true,"setpoint_c":%s,"temp_c":%s,"power_kw":%s,'
            + sensors,
            DRY: start(CONTAINER_SCHEMA, "container_id")
            + container
            + b'"reefer":false,"setpoint_c":null,"temp_c":null,"power_kw":null,'
            + sensors,
            CALL: start(PORT_EVENT_SCHEMA, "port")
            + port
            + b'"container_id":null,"owner":null,"cargo":null}',
            CARGO: start(PORT_EVENT_SCHEMA, "port")
            + port
            + b'"container_id":%s,"owner":%s,"cargo":%s}',
        }
        self._ids = table.json_ids
        self._ships = _nullable(ship_ids)
        self._boxes = _nullable(container_ids)
        self._ports = _nullable(port_codes)
        self._owners = _nullable(owners)
        self._cargo = _nullable(list(cargo))
        self._nav = string_table(("under_way", "moored"))
        self._channels = string_table(CHANNELS)
        self._alarms = string_table(ALARMS)
        self._events = string_table(EVENT_KINDS)
        self._bools = np.array([b"false", b"true"], dtype=object)
        # lat/lon at 5 decimals span too many values for a lookup table: formatted one by one
        self._floats = {
            name: FixedDecimals(dec, max_span=0 if dec == 5 else 200_000)
            for name, dec in (
                ("lat", 5),
                ("lon", 5),
                ("sog", 1),
                ("cog", 0),
                ("setpoint", 1),
                ("temp", 2),
                ("power", 2),
                ("shock", 2),
            )
        }

    def encode(self, rows: np.ndarray) -> list[bytes]:
        rk = rows["rk"]
        first = int(rk[0]) if rows.shape[0] else 0
        if rows.shape[0] and (rk == first).all():
            return self._kind(first, rows)
        out = np.empty(rows.shape[0], dtype=object)
        for kind in self.templates:
            idx = np.flatnonzero(rk == kind)
            if idx.size:
                part = self._kind(kind, take(rows, idx))
                out[idx] = np.array(part, dtype=object)
        result: list[bytes] = out.tolist()
        return result

    def _f(self, name: str, rows: np.ndarray) -> list[object]:
        return self._floats[name].literals(rows[name])

    def _kind(self, kind: int, rows: np.ndarray) -> list[bytes]:
        cols: list[list[object]] = [
            rows["gen"].tolist(),
            self._ids[rows["ent"]].tolist(),
            rows["event_ms"].tolist(),
            rows["seq"].tolist(),
        ]
        if kind == POSITION:
            cols += [
                rows["voyage"].tolist(),
                self._f("lat", rows),
                self._f("lon", rows),
                self._f("sog", rows),
                self._f("cog", rows),
                self._nav[rows["nav"]].tolist(),
                self._ports[rows["port"]].tolist(),
                self._channels[rows["channel"]].tolist(),
            ]
        elif kind in (REEFER, DRY):
            voyage = rows["voyage"]
            cols += [
                self._ships[rows["ship"]].tolist(),
                np.where(voyage < 0, NULL, voyage.astype("S20")).tolist(),
                self._ports[rows["port"]].tolist(),
                self._owners[rows["owner"]].tolist(),
                self._cargo[rows["cargo"]].tolist(),
                self._ports[rows["disch"]].tolist(),
                self._ports[rows["final"]].tolist(),
            ]
            if kind == REEFER:
                cols += [self._f("setpoint", rows), self._f("temp", rows), self._f("power", rows)]
            cols += [
                self._bools[rows["door"]].tolist(),
                self._f("shock", rows),
                self._alarms[rows["alarm"]].tolist(),
                self._channels[rows["channel"]].tolist(),
            ]
        else:
            cols += [
                self._events[rows["ev"]].tolist(),
                self._ships[rows["ship"]].tolist(),
                rows["voyage"].tolist(),
            ]
            if kind == CARGO:
                cols += [
                    self._boxes[rows["box"]].tolist(),
                    self._owners[rows["owner"]].tolist(),
                    self._cargo[rows["cargo"]].tolist(),
                ]
        return list(map(self.templates[kind].__mod__, zip(*cols, strict=True)))


__all__ = ["ShippingEncoder"]
