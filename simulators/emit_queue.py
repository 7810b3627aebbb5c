"""Sends waiting for their emit time: a calendar queue of buckets one tick wide.

A push splits rows into buckets by emit time; a pop takes the due buckets and sorts just those
(stable, so equal emit times keep push order, which is deterministic). Each row is copied twice,
however long it waits. The size is bounded by the event rate times the delay horizon (delays are
capped), not by the run length.
"""

from __future__ import annotations

import numpy as np

from simulators.records import concat, take


class EmitQueue:
    def __init__(self, dtype: np.dtype, origin_ms: int, bucket_ms: int) -> None:
        self._dtype = dtype
        self._origin = origin_ms
        self._width = max(int(bucket_ms), 1)
        self._buckets: dict[int, list[np.ndarray]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def _bucket(self, t_ms: np.ndarray | int) -> np.ndarray | int:
        return (t_ms - self._origin) // self._width

    def push(self, rows: np.ndarray) -> None:
        if rows.shape[0] == 0:
            return
        keys = self._bucket(rows["emit_ms"])
        assert isinstance(keys, np.ndarray)
        order = np.argsort(keys, kind="stable")
        keys, rows = keys[order], take(rows, order)
        firsts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        for key, part in zip(keys[firsts].tolist(), np.split(rows, firsts[1:]), strict=True):
            self._buckets.setdefault(key, []).append(part)
        self._count += rows.shape[0]

    def pop_before(self, t_ms: int) -> np.ndarray:
        """Remove and return the sends with emit_ms < t_ms, in emit order."""
        last = int(self._bucket(t_ms))
        due = sorted(k for k in self._buckets if k <= last)
        parts = [part for k in due for part in self._buckets.pop(k)]
        if not parts:
            return np.zeros(0, dtype=self._dtype)
        rows = concat(parts, self._dtype)
        rows = take(rows, np.argsort(rows["emit_ms"], kind="stable"))
        cut = int(np.searchsorted(rows["emit_ms"], t_ms, side="left"))
        if cut < rows.shape[0]:  # the bucket holding t_ms keeps its later rows
            self._buckets[last] = [rows[cut:]]
        self._count -= cut
        return rows[:cut]
