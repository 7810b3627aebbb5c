"""Event serialisation for vehicle telemetry: the engine's bytes-template encoding, plus fields
that may be JSON null (no GPS fix in a tunnel: `"lat":null,"lon":null`).

A nullable float column holds NaN for null; it is rounded to the field's decimals and written
with `%a` (Python's shortest repr of the rounded float, valid JSON), or `null`. Payload columns
not listed (e.g. the truth-only `hard_negative`) are not written.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simulators.encoding import PayloadField, json_bytes, string_table
from simulators.entities import EntityTable


class _Null:
    def __repr__(self) -> str:
        return "null"


NULL = _Null()


class VehicleEventEncoder:
    def __init__(
        self,
        schema: str,
        entity_field: str,
        id_prefix: str,
        table: EntityTable,
        fields: Sequence[PayloadField],
        nullable: Sequence[str] = (),
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
        self._nullable = frozenset(nullable)
        body = b"".join(
            b"," + json_bytes(f.name) + b":" + (b"%a" if f.name in self._nullable else f.format)
            for f in fields
        )
        self.template = head + body + b"}"
        self._ids = table.json_ids
        self._fields = list(fields)
        self._choices = {f.name: string_table(f.choices) for f in fields if f.kind == "enum"}

    def encode(self, rows: np.ndarray) -> list[bytes]:
        columns: list[list[object]] = [
            rows["gen"].tolist(),
            self._ids[rows["ent"]].tolist(),
            rows["event_ms"].tolist(),
            rows["seq"].tolist(),
        ]
        for f in self._fields:
            column = rows[f.name]
            if f.name in self._nullable:
                values: list[object] = np.round(column, f.decimals).tolist()
                for k in np.flatnonzero(np.isnan(column)).tolist():
                    values[k] = NULL
                columns.append(values)
            elif f.kind == "enum":
                columns.append(self._choices[f.name][column].tolist())
            else:
                columns.append(column.tolist())
        return list(map(self.template.__mod__, zip(*columns, strict=True)))
