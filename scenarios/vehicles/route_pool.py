"""Every vehicle's current route in a few flat numpy arrays, for vectorised look-ups.

Routes are appended into buffers with spare capacity; vehicle v's vertices are
`lo[v] <= i < hi[v]` and its stops `stop_lo[v] <= j < stop_hi[v]`. A new route leaves the old
one as garbage; when the buffer is full, live routes are compacted to the front (and the
buffer grows if they still fill most of it), so memory stays ~2x the live routes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scenarios.vehicles.routes import Route

VERTEX_FIELDS = (
    ("s", np.float64),
    ("lat", np.float64),
    ("lon", np.float64),
    ("heading", np.float32),
    ("road", np.int8),
    ("limit", np.int16),
    ("zone", np.int8),
    ("grade", np.float32),
    ("zone_end", np.float64),
    ("road_end", np.float64),
)


def _gather_ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Indices lo[0]..hi[0]-1, lo[1]..hi[1]-1, ... concatenated."""
    sizes = hi - lo
    total = int(sizes.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.repeat(lo - np.r_[0, np.cumsum(sizes)[:-1]], sizes)
    return starts + np.arange(total)


class _Buffer:
    def __init__(self, fields: Sequence[tuple[str, type]], capacity: int) -> None:
        self.fields = fields
        self.cols: dict[str, np.ndarray] = {name: np.zeros(capacity, dtype=t) for name, t in fields}
        self.used = 0

    @property
    def capacity(self) -> int:
        return int(next(iter(self.cols.values())).shape[0])

    def append(self, parts: dict[str, list[np.ndarray]], size: int) -> int:
        at = self.used
        for name, _ in self.fields:
            self.cols[name][at : at + size] = np.concatenate(parts[name])
        self.used += size
        return at

    def rebuild(self, index: np.ndarray, capacity: int) -> None:
        for name, t in self.fields:
            col: np.ndarray = np.zeros(capacity, dtype=t)
            col[: index.shape[0]] = self.cols[name][index]
            self.cols[name] = col
        self.used = int(index.shape[0])


class RoutePool:
    def __init__(self, n: int, capacity: int = 1 << 16) -> None:
        self.v = _Buffer(VERTEX_FIELDS, capacity)
        self.st = _Buffer((("stop", np.float64),), max(capacity // 16, 1024))
        self.lo = np.zeros(n, dtype=np.int64)
        self.hi = np.zeros(n, dtype=np.int64)
        self.stop_lo = np.zeros(n, dtype=np.int64)
        self.stop_hi = np.zeros(n, dtype=np.int64)

    def __getattr__(self, name: str) -> np.ndarray:
        cols = self.__dict__["v"].cols
        if name in cols:
            return cols[name]
        if name == "stop":
            return self.__dict__["st"].cols["stop"]
        raise AttributeError(name)

    def assign(self, vehicles: np.ndarray, routes: Sequence[Route]) -> None:
        """Give each vehicle its new route (vehicles distinct)."""
        if not routes:
            return
        sizes = np.array([r.s.shape[0] for r in routes], dtype=np.int64)
        stops = np.array([r.stops.shape[0] for r in routes], dtype=np.int64)
        self._make_room(self.v, int(sizes.sum()), self.lo, self.hi, vehicles)
        self._make_room(self.st, int(stops.sum()), self.stop_lo, self.stop_hi, vehicles)
        at = self.v.append(
            {n: [getattr(r, n) for r in routes] for n, _ in VERTEX_FIELDS}, int(sizes.sum())
        )
        self.lo[vehicles] = at + np.r_[0, np.cumsum(sizes)[:-1]]
        self.hi[vehicles] = self.lo[vehicles] + sizes
        at = self.st.append({"stop": [r.stops for r in routes]}, int(stops.sum()))
        self.stop_lo[vehicles] = at + np.r_[0, np.cumsum(stops)[:-1]]
        self.stop_hi[vehicles] = self.stop_lo[vehicles] + stops

    @staticmethod
    def _make_room(
        buf: _Buffer, need: int, lo: np.ndarray, hi: np.ndarray, replaced: np.ndarray
    ) -> None:
        if buf.used + need <= buf.capacity:
            return
        keep = np.ones(lo.shape[0], dtype=bool)
        keep[replaced] = False  # their old routes are garbage now
        keep &= hi > lo
        owners = np.flatnonzero(keep)
        index = _gather_ranges(lo[owners], hi[owners])
        live = int(index.shape[0])
        capacity = buf.capacity
        while live + need > capacity // 2:
            capacity *= 2
        buf.rebuild(index, capacity)
        sizes = hi[owners] - lo[owners]
        lo[owners] = np.r_[0, np.cumsum(sizes)[:-1]]
        hi[owners] = lo[owners] + sizes
        lo[replaced] = hi[replaced] = 0
