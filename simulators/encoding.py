"""Event serialisation: one bytes template per scenario, filled from columns.

`template % row` is ~4x faster than building a dict and calling orjson per event (measured:
~0.9M vs ~0.2M events/s on this machine), and the output is still plain compact JSON:

    {"schema":"sensor.reading/1","event_id":"sf-3f2a9c1b-1e240","sensor_id":"sensor-004731",
     "event_time":1767226366202,"seq":0,"site":"Port Jennifer","temperature_c":14.47,...}

Strings come from tables encoded once at set-up (json), so escaping is always right.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
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


def json_bytes(value: object) -> bytes:
    """Compact JSON. Not orjson: its results keep a ~4 KB buffer each, which matters for
    tables with an entry per entity."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def string_table(values: Sequence[str]) -> np.ndarray:
    """JSON literals of `values` as an object array, to gather with an index column."""
    return np.array([json_bytes(v) for v in values], dtype=object)


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
        body = b"".join(b"," + json_bytes(f.name) + b":" + f.format for f in payload)
        self.template = head + body + b"}"
        self._ids = table.json_ids
        self._payload = list(payload)
        self._choices = {f.name: string_table(f.choices) for f in payload if f.kind == "enum"}

    def encode(self, rows: np.ndarray) -> list[bytes]:
        columns: list[list[object]] = [
            rows["gen"].tolist(),
            self._ids[rows["ent"]].tolist(),
            rows["event_ms"].tolist(),
            rows["seq"].tolist(),
        ]
        for f in self._payload:
            column = rows[f.name]
            columns.append(
                self._choices[f.name][column].tolist() if f.kind == "enum" else column.tolist()
            )
        return list(map(self.template.__mod__, zip(*columns, strict=True)))
