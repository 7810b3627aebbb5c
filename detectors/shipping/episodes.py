"""Runs of consecutive flagged readings per entity, the building block of the shipping rules."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd


def runs(flag: np.ndarray, times: np.ndarray, max_gap_ms: float) -> Iterator[np.ndarray]:
    """Index arrays of maximal runs of True in `flag` (times sorted), broken by a longer gap."""
    n = flag.shape[0]
    if n == 0:
        return
    gap = np.r_[True, np.diff(times) > max_gap_ms]
    start = flag & (gap | ~np.r_[False, flag[:-1]])
    ids = np.cumsum(start)
    ids = np.where(flag, ids, 0)
    for k in np.unique(ids[ids > 0]).tolist():
        yield np.flatnonzero(ids == k)


def by_entity(frame: pd.DataFrame, key: str) -> Iterator[tuple[str, pd.DataFrame]]:
    """Each entity's rows in event-time order (ties by event id, so the order is stable)."""
    ordered = frame.sort_values([key, "event_time", "event_id"], kind="stable")
    for entity, rows in ordered.groupby(key, sort=True):
        yield str(entity), rows


def at_sea(frame: pd.DataFrame) -> np.ndarray:
    """Container readings on a ship and not in a port."""
    return (frame["ship_id"].notna() & frame["port"].isna()).to_numpy()
