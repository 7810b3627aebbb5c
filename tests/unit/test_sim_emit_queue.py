"""The emit queue releases exactly the sends that are due, in emit order, ties in push order."""

from __future__ import annotations

import numpy as np

from simulators.emit_queue import EmitQueue
from simulators.records import row_dtype

DTYPE = row_dtype([])


def test_pops_are_the_stable_emit_order_of_everything_pushed() -> None:
    rng = np.random.default_rng(4)
    queue = EmitQueue(DTYPE, origin_ms=0, bucket_ms=1000)
    pushed, popped = [], []
    label = 0
    for tick in range(1, 40):
        rows = np.zeros(int(rng.integers(0, 300)), dtype=DTYPE)
        rows["emit_ms"] = tick * 1000 + rng.integers(0, 8000, rows.shape[0]) // 7 * 7
        rows["gen"] = np.arange(label, label + rows.shape[0])  # push order
        label += rows.shape[0]
        queue.push(rows)
        pushed.append(rows)
        due = queue.pop_before(tick * 1000 + 500)  # not aligned to the buckets
        assert (due["emit_ms"] < tick * 1000 + 500).all()
        popped.append(due)
    popped.append(queue.pop_before(10**9))
    assert len(queue) == 0
    everything = np.concatenate(pushed)
    expected = everything[np.argsort(everything["emit_ms"], kind="stable")]
    got = np.concatenate(popped)
    assert got["gen"].tolist() == expected["gen"].tolist()
