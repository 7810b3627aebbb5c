"""The local broker's pure helpers."""

from __future__ import annotations

from streamsim.kafka.broker import new_cluster_id


def test_cluster_ids_never_start_with_a_dash() -> None:
    """`kafka-storage format -t -abc...` reads the id as an option: 1 random id in 64 did."""
    ids = [new_cluster_id() for _ in range(2000)]
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    assert len(set(ids)) == len(ids)
