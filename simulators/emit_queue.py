"""Sends waiting for their emit time, kept sorted by it (ties keep generation order).

Its size is bounded by the event rate times the delay horizon (delays are capped), not by the
run length.
"""

from __future__ import annotations

import numpy as np


class EmitQueue:
    def __init__(self, dtype: np.dtype) -> None:
        self._rows = np.zeros(0, dtype=dtype)

    def __len__(self) -> int:
        return int(self._rows.shape[0])

    def push(self, rows: np.ndarray) -> None:
        if rows.shape[0] == 0:
            return
        merged = np.concatenate([self._rows, rows])
        # Stable: the queue is already sorted, so timsort merges two runs in linear time.
        self._rows = merged[np.argsort(merged["emit_ms"], kind="stable")]

    def pop_before(self, t_ms: int) -> np.ndarray:
        """Remove and return the sends with emit_ms < t_ms, in emit order."""
        cut = int(np.searchsorted(self._rows["emit_ms"], t_ms, side="left"))
        out, self._rows = self._rows[:cut], self._rows[cut:]
        return out
