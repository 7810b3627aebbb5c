"""Bounded memory of event ids already seen, for the stateful forms."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable


class SeenIds:
    """Remembers the last `capacity` event ids; `add` says whether an id is new.

    >>> seen = SeenIds(capacity=2)
    >>> seen.add("a"), seen.add("a"), seen.add("b"), seen.add("c"), seen.add("a")
    (True, False, True, True, True)
    """

    __slots__ = ("_ids", "_order", "capacity")

    def __init__(self, capacity: int = 1024, ids: Iterable[str] = ()) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._order: deque[str] = deque()
        self._ids: set[str] = set()
        for event_id in ids:
            self.add(event_id)

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, event_id: str) -> bool:
        """Remember `event_id`; False when it was already remembered."""
        ids, order = self._ids, self._order
        if event_id in ids:
            return False
        if len(order) >= self.capacity:
            ids.discard(order.popleft())
        ids.add(event_id)
        order.append(event_id)
        return True

    def to_list(self) -> list[str]:
        """Oldest first; `SeenIds(capacity, ids=seen.to_list())` restores it."""
        return list(self._order)
