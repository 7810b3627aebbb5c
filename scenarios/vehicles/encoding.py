"""Event serialisation for vehicle telemetry: the engine's bytes-template encoding, with fields
that may be JSON null (no GPS fix in a tunnel: `"lat":null,"lon":null`) and faster numbers.

Fixed-decimal floats are looked up: each field keeps a table of its values' JSON text for the
range of (value x 10^decimals) integers seen so far (grown on demand, at most `MAX_TABLE`
entries), and `%s` of ready bytes is much cheaper than `%.2f` of a float. Fields with a wider
range (odometer, positions) are written from integers instead (`%d.%05d`, with a sign slot
where the value can be negative). Rows with a null field use a second template with `null`
written in. Payload columns not listed (e.g. the truth-only `hard_negative`) are not written.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simulators.encoding import PayloadField, json_bytes, string_table
from simulators.entities import EntityTable

SIGNS = np.array([b"", b"-"], dtype=object)
MAX_TABLE = 50_000


class _Texts:
    """JSON texts of k / 10^decimals for integers k in a range that grows as values come."""

    def __init__(self, decimals: int) -> None:
        self.decimals = decimals
        self.lo, self.texts = 0, np.zeros(0, dtype=object)

    def lookup(self, scaled: np.ndarray) -> list[object] | None:
        """Texts for the scaled integers, or None when their range is too wide for a table."""
        lo, hi = int(scaled.min()), int(scaled.max()) + 1
        if lo < self.lo or hi > self.lo + self.texts.shape[0]:
            new_lo = min(lo, self.lo) if self.texts.shape[0] else lo
            new_hi = max(hi, self.lo + self.texts.shape[0])
            span = new_hi - new_lo
            new_lo, new_hi = new_lo - span // 4, new_hi + span // 4  # room to grow
            if new_hi - new_lo > MAX_TABLE:
                return None
            fmt = b"%%.%df" % self.decimals
            scale = 10**self.decimals
            self.texts = np.array([fmt % (k / scale) for k in range(new_lo, new_hi)], dtype=object)
            self.lo = new_lo
        return self.texts[scaled - self.lo].tolist()


class VehicleEventEncoder:
    def __init__(
        self,
        schema: str,
        entity_field: str,
        id_prefix: str,
        table: EntityTable,
        fields: Sequence[PayloadField],
        nullable: Sequence[str] = (),
        signed: Sequence[str] = (),
    ) -> None:
        """`nullable`: float fields where NaN means null; `signed`: float fields that may be
        negative (the others are written as >= 0)."""
        head = (
            b'{"schema":'
            + json_bytes(schema)
            + b',"event_id":"'
            + id_prefix.encode()
            + b'%x",'
            + json_bytes(entity_field)
            + b':%s,"event_time":%d,"seq":%d'
        )
        self._fields = list(fields)
        self._nullable = frozenset(nullable)
        self._signed = frozenset(signed)
        self.template = head + b"".join(self._part(f, null=False) for f in fields) + b"}"
        self._null_template = head + b"".join(self._part(f, null=True) for f in fields) + b"}"
        self._ids = table.json_ids
        self._choices = {f.name: string_table(f.choices) for f in fields if f.kind == "enum"}
        self._texts = {f.name: _Texts(f.decimals) for f in fields if f.kind == "float"}

    def _part(self, f: PayloadField, null: bool) -> bytes:
        key = b"," + json_bytes(f.name) + b":"
        if null and f.name in self._nullable:
            return key + b"null"
        if f.kind == "int":
            return key + b"%d"
        return key + b"%s"  # enum and float: ready texts

    def encode(self, rows: np.ndarray) -> list[bytes]:
        nulls = np.zeros(rows.shape[0], dtype=bool)
        for name in self._nullable:
            nulls |= np.isnan(rows[name])
        if not nulls.any():
            return self._encode(rows, self.template, null=False)
        out = np.empty(rows.shape[0], dtype=object)
        out[~nulls] = self._encode(rows[~nulls], self.template, null=False)
        out[nulls] = self._encode(rows[nulls], self._null_template, null=True)
        return out.tolist()

    def _encode(self, rows: np.ndarray, template: bytes, null: bool) -> list[bytes]:
        columns: list[list[object]] = [
            rows["gen"].tolist(),
            self._ids[rows["ent"]].tolist(),
            rows["event_ms"].tolist(),
            rows["seq"].tolist(),
        ]
        for f in self._fields:
            column = rows[f.name]
            if f.kind == "enum":
                columns.append(self._choices[f.name][column].tolist())
            elif f.kind == "int":
                columns.append(column.tolist())
            elif null and f.name in self._nullable:
                continue
            else:
                columns.append(self._floats(f, column))
        return list(map(template.__mod__, zip(*columns, strict=True)))

    def _floats(self, f: PayloadField, column: np.ndarray) -> list[object]:
        scale = 10**f.decimals
        if f.name not in self._signed:
            column = np.maximum(column, 0.0)
        scaled = np.rint(column * scale).astype(np.int64)
        if scaled.shape[0] == 0:
            return []
        texts = self._texts[f.name].lookup(scaled)
        if texts is not None:
            return texts
        whole, frac = np.divmod(np.abs(scaled), scale)
        fmt = b"%s%d.%0" + str(f.decimals).encode() + b"d" if f.decimals else b"%s%d"
        signs = SIGNS[(scaled < 0).astype(np.int64)].tolist()
        if not f.decimals:
            return list(map(fmt.__mod__, zip(signs, whole.tolist(), strict=True)))
        return list(map(fmt.__mod__, zip(signs, whole.tolist(), frac.tolist(), strict=True)))
