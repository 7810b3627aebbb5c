"""Vectorised sliding-window arithmetic over one entity's rows, sorted by event time.

The window of row i is every row j with `t_i - window < t_j <= t_i`: the window ending at the
row's own event time, including rows stamped the same millisecond. It depends only on the set
of events, never on their arrival order.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

IntArray = NDArray[np.int64]


def window_bounds(times_ms: ArrayLike, window_ms: float) -> tuple[IntArray, IntArray]:
    """`(left, right)`: row i's window is rows `left[i]:right[i]` (times must be sorted).

    >>> left, right = window_bounds([0, 5, 5, 20], 10)
    >>> left.tolist(), right.tolist()
    ([0, 0, 0, 3], [1, 3, 3, 4])
    """
    times = np.asarray(times_ms, dtype=np.float64)
    right = np.searchsorted(times, times, side="right").astype(np.int64)
    left = np.searchsorted(times, times - window_ms, side="right").astype(np.int64)
    return left, right


def window_sum(values: ArrayLike, left: IntArray, right: IntArray) -> NDArray[np.float64]:
    """The sum of `values` over each window."""
    totals = np.concatenate([[0.0], np.cumsum(np.asarray(values, dtype=np.float64))])
    return np.asarray(totals[right] - totals[left], dtype=np.float64)


def window_distinct(codes: ArrayLike, left: IntArray, right: IntArray) -> IntArray:
    """How many distinct values of `codes` each window holds.

    A row counts when the previous row with the same code lies before the window. The loop
    runs over offsets inside a window (at most the largest window's size), not over rows.

    >>> left, right = window_bounds([0, 1, 2, 3], 10)
    >>> window_distinct(["a", "b", "a", "c"], left, right).tolist()
    [1, 2, 2, 3]
    """
    values = np.asarray(codes)
    n = values.size
    counts = np.zeros(n, dtype=np.int64)
    if n == 0:
        return counts
    _, inverse = np.unique(values, return_inverse=True)
    order = np.lexsort((np.arange(n), inverse))
    same = np.zeros(n, dtype=bool)
    same[1:] = inverse[order][1:] == inverse[order][:-1]
    previous = np.full(n, -1, dtype=np.int64)
    previous[order[1:][same[1:]]] = order[:-1][same[1:]]
    for offset in range(int((right - left).max())):
        rows = np.flatnonzero(left + offset < right)
        j = left[rows] + offset
        counts[rows] += previous[j] < left[rows]
    return counts
