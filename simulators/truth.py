"""Truth records: one JSON object per delivery attempt, keyed by event_id.

Keys (the data contract): event_id, entity_id, scenario, true_time, event_time, emit_time,
clock_offset_ms, delay_ms, outage_id, duplicate_of, dropped, label, incident_id.

A scenario may add keys after these (`TruthField`), e.g. `device_id` when its events pass
through devices other than the entity (a card's transactions through POS terminals), or
`hard_negative` (cards). The 13 keys above keep their meaning in every scenario.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulators.encoding import json_bytes, string_table
from simulators.entities import EntityTable
from simulators.records import DROP_REASONS, NO_ID, take

TRUTH_KEYS = (
    "event_id",
    "entity_id",
    "scenario",
    "true_time",
    "event_time",
    "emit_time",
    "clock_offset_ms",
    "delay_ms",
    "outage_id",
    "duplicate_of",
    "dropped",
    "label",
    "incident_id",
)

NULL = b"null"


@dataclass(frozen=True)
class TruthField:
    """An extra truth key: the JSON literal `literals[row[column]]` (e.g. from `choices`)."""

    name: str
    column: str  # an integer column of the rows: engine or payload
    literals: np.ndarray  # object array of JSON literals (bytes)

    @classmethod
    def choices(cls, name: str, column: str, values: Sequence[str | None]) -> TruthField:
        """Values by index; None is JSON null."""
        return cls(name, column, np.array([json_bytes(v) for v in values], dtype=object))


class TruthEncoder:
    """Builds (keys, values, timestamps) for sent and for dropped rows."""

    def __init__(
        self,
        scenario: str,
        id_prefix: str,
        table: EntityTable,
        labels: Sequence[str],
        extras: Sequence[TruthField] = (),
    ) -> None:
        prefix = id_prefix.encode()
        self._event_id = prefix + b"%x"
        self._quoted_id = b'"' + prefix + b'%x"'
        self._outage_id = b'"' + prefix + b'o%d"'
        self._incident_id = b'"' + prefix + b'i%d"'
        self._ids = table.json_ids
        self._labels = string_table(labels)
        self._reasons = np.array(
            [NULL if r is None else json_bytes(r) for r in DROP_REASONS], dtype=object
        )
        self._extras = list(extras)
        tail = b"".join(b"," + json_bytes(f.name) + b":%s" for f in self._extras) + b"}"
        head = b'{"event_id":"' + prefix + b'%x","entity_id":%s,"scenario":' + json_bytes(scenario)
        self._sent = (
            head + b',"true_time":%d,"event_time":%d,"emit_time":%d,"clock_offset_ms":%d,'
            b'"delay_ms":%d,%s' + tail
        )
        # The keys that are null or "none" for most deliveries, as one field: a constant for
        # those, formatted only for the rest (~25% less work per record).
        self._sent_flags = (
            b'"outage_id":%s,"duplicate_of":%s,"dropped":null,"label":%s,"incident_id":%s'
        )
        self._plain_flags = self._sent_flags % (NULL, NULL, self._labels[0], NULL)
        self._dropped = (
            head + b',"true_time":%d,"event_time":%d,"emit_time":null,"clock_offset_ms":%d,'
            b'"delay_ms":null,"outage_id":%s,"duplicate_of":null,"dropped":%s,"label":%s,'
            b'"incident_id":%s' + tail
        )

    def keys(self, rows: np.ndarray) -> list[bytes]:
        return list(map(self._event_id.__mod__, rows["gen"].tolist()))

    def sent(self, rows: np.ndarray) -> list[bytes]:
        true_ms, event_ms, emit_ms = rows["true_ms"], rows["event_ms"], rows["emit_ms"]
        columns = (
            rows["gen"].tolist(),
            self._ids[rows["ent"]].tolist(),
            true_ms.tolist(),
            event_ms.tolist(),
            emit_ms.tolist(),
            (event_ms - true_ms).tolist(),
            (emit_ms - true_ms).tolist(),
            self._flags(rows),
            *self._extra_columns(rows),
        )
        return list(map(self._sent.__mod__, zip(*columns, strict=True)))

    def _flags(self, rows: np.ndarray) -> list[bytes]:
        """outage_id, duplicate_of, dropped (null), label and incident_id, as one field."""
        special = (
            (rows["outage"] != NO_ID)
            | rows["dup"]
            | (rows["label"] != 0)
            | (rows["incident"] != NO_ID)
        )
        out = np.full(rows.shape[0], self._plain_flags, dtype=object)
        which = np.flatnonzero(special)
        if which.size:
            some = take(rows, which)
            held = (some["outage"] != NO_ID) & ~some["dup"]
            held &= (some["label"] == 0) & (some["incident"] == NO_ID)
            if held.any():  # a flushed backlog: one text per outage, not per record
                ids, inverse = np.unique(some["outage"][held], return_inverse=True)
                texts = np.array(
                    [
                        self._sent_flags % (self._outage_id % i, NULL, self._labels[0], NULL)
                        for i in ids.tolist()
                    ],
                    dtype=object,
                )
                out[which[held]] = texts[inverse.reshape(-1)]
                which, some = which[~held], take(some, np.flatnonzero(~held))
        if which.size:
            columns = (
                self._optional(some["outage"], self._outage_id),
                self._duplicate_of(some),
                self._labels[some["label"]].tolist(),
                self._optional(some["incident"], self._incident_id),
            )
            out[which] = list(map(self._sent_flags.__mod__, zip(*columns, strict=True)))
        return out.tolist()

    def dropped(self, rows: np.ndarray) -> list[bytes]:
        columns = (
            rows["gen"].tolist(),
            self._ids[rows["ent"]].tolist(),
            rows["true_ms"].tolist(),
            rows["event_ms"].tolist(),
            (rows["event_ms"] - rows["true_ms"]).tolist(),
            self._optional(rows["outage"], self._outage_id),
            self._reasons[rows["dropped"]].tolist(),
            self._labels[rows["label"]].tolist(),
            self._optional(rows["incident"], self._incident_id),
            *self._extra_columns(rows),
        )
        return list(map(self._dropped.__mod__, zip(*columns, strict=True)))

    def _extra_columns(self, rows: np.ndarray) -> list[list[bytes]]:
        return [f.literals[rows[f.column]].tolist() for f in self._extras]

    @staticmethod
    def _optional(ids: np.ndarray, template: bytes) -> list[bytes]:
        out = np.full(ids.shape[0], NULL, dtype=object)
        present = np.flatnonzero(ids != NO_ID)
        if present.size:
            out[present] = list(map(template.__mod__, ids[present].tolist()))
        return out.tolist()

    def _duplicate_of(self, rows: np.ndarray) -> list[bytes]:
        out = np.full(rows.shape[0], NULL, dtype=object)
        dup = np.flatnonzero(rows["dup"])
        if dup.size:
            out[dup] = list(map(self._quoted_id.__mod__, rows["gen"][dup].tolist()))
        return out.tolist()
