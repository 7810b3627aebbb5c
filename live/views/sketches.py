"""The panel's sketch view (pure, no Kafka): of the records on `aggregates.heavy-hitters` and
`aggregates.distinct-counts` (`core.contracts.sketches`), each job and kind's newest window:
its heavy hitters by rank, and its keys' distinct counts, largest first. Every figure is an
estimate; its bound travels with it (ε, δ and ε·N; the relative standard error)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def newest_windows(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str], list[dict]]:
    """(job, kind) -> the records of its newest window (one record per key: the last seen).

    >>> r = [{"job": "cards", "kind": "terminal", "key": "t1", "window_start": 0, "rank": 1},
    ...      {"job": "cards", "kind": "terminal", "key": "t2", "window_start": 60, "rank": 1}]
    >>> [x["key"] for x in newest_windows(r)[("cards", "terminal")]]
    ['t2']
    """
    newest: dict[tuple[str, str], int] = {}
    kept: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in records:
        try:
            at, start, key = (str(r["job"]), str(r["kind"])), int(r["window_start"]), str(r["key"])
        except (KeyError, TypeError, ValueError):
            continue
        if start > newest.get(at, -1):
            newest[at], kept[at] = start, {}
        if start == newest[at]:
            kept[at][key] = r
    return {at: list(rows.values()) for at, rows in kept.items()}


def sketch_view(
    heavy: Iterable[dict[str, Any]], distinct: Iterable[dict[str, Any]], limit: int = 20
) -> dict[str, Any]:
    """Heavy hitters by rank and distinct counts by estimate (at most `limit` each), of each
    job and kind's newest window."""
    hitters = []
    for rows in newest_windows(heavy).values():
        hitters.extend(sorted(rows, key=lambda r: r.get("rank") or 0)[:limit])
    counts = []
    for rows in newest_windows(distinct).values():
        counts.extend(sorted(rows, key=lambda r: -(r.get("estimate") or 0))[:limit])
    return {"heavy_hitters": hitters, "distinct_counts": counts}
