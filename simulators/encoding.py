"""Event serialisation: one bytes template per scenario, filled from columns.

`template % row` is several times faster than building a dict and calling orjson per event,
and the output is still plain compact JSON:

    {"schema":"sensor.reading/1","event_id":"sf-3f2a9c1b-1e240","sensor_id":"sensor-004731",
     "event_time":1767226366202,"seq":0,"site":"Port Jennifer","temperature_c":14.47,...}

Strings come from tables encoded once at set-up (json), so escaping is always right.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from core.contracts import EventSchema
    from simulators.entities import EntityTable


_DTYPES = {"int": "i8", "float": "f8", "enum": "i4"}


@dataclass(frozen=True)
class PayloadField:
    """A payload column: an int, a float with fixed decimals, or one of a few strings."""

    name: str
    kind: Literal["int", "float", "enum"]
    decimals: int = 2
    choices: tuple[str, ...] = ()

    @property
    def dtype(self) -> str:
        return _DTYPES[self.kind]

    @property
    def format(self) -> bytes:
        return {"int": b"%d", "float": b"%%.%df" % self.decimals, "enum": b"%s"}[self.kind]


def payload_fields(
    schema: EventSchema, choices: Mapping[str, Sequence[str]] | None = None
) -> tuple[PayloadField, ...]:
    """The payload columns of `schema`'s events (`core.contracts`), in wire order: ints and
    fixed-decimal floats as declared, strings as enums over their declared values or over
    `choices[name]` (values fixed per run, e.g. site names)."""
    given = choices or {}
    out = []
    for f in schema.payload:
        if f.type == "int":
            out.append(PayloadField(f.name, "int"))
        elif f.type == "float":
            out.append(PayloadField(f.name, "float", decimals=f.decimals))
        elif f.type == "string" and (f.name in given or f.choices):
            out.append(PayloadField(f.name, "enum", choices=tuple(given.get(f.name, f.choices))))
        else:
            raise ValueError(f"{schema.id}: no column encoding for {f.type} field {f.name!r}")
    return tuple(out)


def json_bytes(value: object) -> bytes:
    """Compact JSON. Not orjson: its results keep a ~4 KB buffer each, which matters for
    tables with an entry per entity."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def string_table(values: Sequence[str]) -> np.ndarray:
    """JSON literals of `values` as an object array, to gather with an index column."""
    return np.array([json_bytes(v) for v in values], dtype=object)


class FixedDecimals:
    """Floats as JSON literals with fixed decimals, looked up instead of formatted.

    `%.2f` costs ~70 ns a value; a gather from a table of every literal seen so far costs ~10.
    A value is rounded to the nearest multiple k of 10^-decimals (half to even) and written as
    `"%.{decimals}f" % (k / 10^decimals)` (so never "-0.00"). The table grows to the span of
    values seen, up to `max_span` entries; a batch beyond that (or with NaN/inf) is formatted
    value by value.
    """

    def __init__(self, decimals: int, max_span: int = 200_000) -> None:
        self.scale = 10.0**decimals
        self.format = b"%%.%df" % decimals
        self.max_span = max_span
        self._lo = 0
        self._table = np.zeros(0, dtype=object)

    def literals(self, values: np.ndarray) -> list[object]:
        if values.shape[0] == 0:
            return []
        scaled = np.rint(values * self.scale)
        lo, hi = float(scaled.min()), float(scaled.max())
        if not (np.isfinite(lo) and np.isfinite(hi)):
            return list(map(self.format.__mod__, values.tolist()))
        lo_i, hi_i = int(lo), int(hi)
        missing = lo_i < self._lo or hi_i >= self._lo + self._table.shape[0]
        if missing and not self._grow(lo_i, hi_i):
            return list(map(self.format.__mod__, (scaled / self.scale).tolist()))
        return self._table[scaled.astype(np.int64) - self._lo].tolist()

    def _grow(self, lo: int, hi: int) -> bool:
        old_hi = self._lo + self._table.shape[0] - 1
        if self._table.shape[0]:
            lo, hi = min(lo, self._lo), max(hi, old_hi)
        if hi - lo + 1 > self.max_span:
            return False
        fmt, scale = self.format, self.scale
        self._table = np.array([fmt % (k / scale) for k in range(lo, hi + 1)], dtype=object)
        self._lo = lo
        return True


class EventEncoder:
    def __init__(
        self,
        schema: str,
        entity_field: str,
        id_prefix: str,
        table: EntityTable,
        payload: Sequence[PayloadField],
    ) -> None:
        head = (
            b'{"schema":'
            + json_bytes(schema)
            + b',"event_id":"'
            + id_prefix.encode()
            + b'%x",'
            + json_bytes(entity_field)
            + b':%s,"event_time":%d,"seq":%d'
        )
        body = b"".join(
            b"," + json_bytes(f.name) + b":" + (b"%s" if f.kind == "float" else f.format)
            for f in payload
        )
        self.template = head + body + b"}"
        self._ids = table.json_ids
        self._payload = list(payload)
        self._choices = {f.name: string_table(f.choices) for f in payload if f.kind == "enum"}
        self._floats = {f.name: FixedDecimals(f.decimals) for f in payload if f.kind == "float"}

    def encode(self, rows: np.ndarray) -> list[bytes]:
        columns: list[list[object]] = [
            rows["gen"].tolist(),
            self._ids[rows["ent"]].tolist(),
            rows["event_ms"].tolist(),
            rows["seq"].tolist(),
        ]
        for f in self._payload:
            column = rows[f.name]
            if f.kind == "enum":
                columns.append(self._choices[f.name][column].tolist())
            elif f.kind == "float":
                columns.append(self._floats[f.name].literals(column))
            else:
                columns.append(column.tolist())
        return list(map(self.template.__mod__, zip(*columns, strict=True)))
