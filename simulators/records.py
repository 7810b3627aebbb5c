"""Columnar batches: a scenario's true-time readings, and the engine's per-delivery rows.

Rows are numpy structured arrays, never Python objects per event. The engine's columns come
first; a scenario's payload columns are appended to the same dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

NO_ID = -1

# Why a delivery did not happen (truth `dropped`).
KEPT, NETWORK, BUFFER_OVERFLOW = 0, 1, 2
DROP_REASONS = (None, "network", "buffer_overflow")

ENGINE_COLUMNS: list[tuple[str, str]] = [
    ("gen", "i8"),  # generation index: makes the event_id
    ("ent", "i4"),  # entity index
    ("dev", "i4"),  # device index: whose clock stamps it and who transmits it (default: ent)
    ("seq", "i8"),  # per-entity sequence number
    ("true_ms", "i8"),
    ("event_ms", "i8"),  # the device clock's stamp
    ("emit_ms", "i8"),  # when transmitted (-1 until known)
    ("label", "i2"),  # index into the scenario's labels; 0 is "none"
    ("incident", "i8"),  # NO_ID or the incident number
    ("outage", "i8"),  # NO_ID or the outage number that buffered it
    ("reconnect_ms", "i8"),  # end of that outage
    ("delay_ms", "i8"),  # network delay drawn for it
    ("retry_ms", "i8"),  # retry delay drawn for it
    ("lost", "?"),  # drawn: lost in transit (at-most-once)
    ("retried", "?"),  # drawn: sent twice (at-least-once)
    ("dup", "?"),  # this row is the retry
    ("dropped", "i1"),  # KEPT, NETWORK or BUFFER_OVERFLOW
]


def row_dtype(payload: Sequence[tuple[str, str]]) -> np.dtype:
    names = {name for name, _ in ENGINE_COLUMNS}
    clash = [name for name, _ in payload if name in names]
    if clash:
        raise ValueError(f"payload columns {clash} clash with engine columns")
    return np.dtype(ENGINE_COLUMNS + list(payload))


@dataclass
class Readings:
    """What a scenario produces: true-time readings with labels and payload columns."""

    ent: np.ndarray  # int32 entity index
    true_ms: np.ndarray  # int64 epoch ms
    label: np.ndarray  # int16
    incident: np.ndarray  # int64, NO_ID when none
    payload: dict[str, np.ndarray] = field(default_factory=dict)
    dev: np.ndarray | None = None  # int32 device index, for scenarios with devices (else ent)
    # int64 epoch ms: the scenario's own connectivity loss (e.g. a vehicle in a tunnel): the
    # device holds the reading until then, as in an outage. NO_ID: online as far as it knows.
    offline_until: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.ent.shape[0])


def to_rows(batches: Sequence[Readings], dtype: np.dtype) -> np.ndarray:
    """Pack readings into rows sorted by (true time, entity): the canonical generation order."""
    n = sum(len(b) for b in batches)
    rows = np.zeros(n, dtype=dtype)
    if n == 0:
        return rows
    for name in ("ent", "true_ms", "label", "incident"):
        rows[name] = np.concatenate([getattr(b, name) for b in batches])
    for name in batches[0].payload:
        rows[name] = np.concatenate([b.payload[name] for b in batches])
    rows["dev"] = np.concatenate([b.ent if b.dev is None else b.dev for b in batches])
    for name in ("emit_ms", "outage", "reconnect_ms"):
        rows[name] = NO_ID
    if any(b.offline_until is not None for b in batches):  # read by DeliveryModel.route
        rows["reconnect_ms"] = np.concatenate(
            [
                np.full(len(b), NO_ID) if b.offline_until is None else b.offline_until
                for b in batches
            ]
        )
    order = np.lexsort((rows["ent"], rows["true_ms"]))
    return take(rows, order)


def _raw(rows: np.ndarray) -> np.ndarray:
    """The same memory as opaque fixed-size items (a copy is then one memcpy per row)."""
    return rows if rows.dtype.hasobject else rows.view((np.void, rows.dtype.itemsize))


def take(rows: np.ndarray, index: np.ndarray) -> np.ndarray:
    """`rows[index]` (integer or boolean index), copied as raw rows: numpy copies structured
    rows field by field, which is an order of magnitude slower."""
    return _raw(rows)[index].view(rows.dtype)


def concat(parts: Sequence[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """Concatenate rows of one dtype, copied as raw rows (see `take`)."""
    parts = [p for p in parts if p.shape[0]]
    if len(parts) == 1:
        return parts[0]
    out = np.empty(sum(p.shape[0] for p in parts), dtype=dtype)
    raw = _raw(out)
    at = 0
    for part in parts:
        raw[at : at + part.shape[0]] = _raw(part)
        at += part.shape[0]
    return out


def group_ranks(keys: np.ndarray) -> np.ndarray:
    """Each element's position among equal keys, in array order (0, 1, 2, ... per key)."""
    n = keys.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    run_start = np.repeat(starts, np.diff(np.r_[starts, n]))
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = np.arange(n) - run_start
    return ranks


def group_sizes(keys: np.ndarray) -> np.ndarray:
    """For each element, how many elements share its key."""
    if keys.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    return counts[inverse]
