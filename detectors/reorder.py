"""Event-time buffering for the stateful series rules: release events in order at a watermark.

Order-sensitive rules (runs, EWMA, trend) need their input in event-time order. Spark hands
`transformWithStateInPandas` each key's new rows per micro-batch, in arrival order, together
with the current watermark. Push the rows into an `EventTimeBuffer` kept in the key's state and
feed the rule only what `release(watermark)` returns: everything at or before the watermark, in
(event_time, event_id) order. An event that arrives after events later than it were already
released is *late*: it is dropped and counted in `late_dropped`, the same events Spark's own
watermark would drop.

>>> buffer = EventTimeBuffer()
>>> for t, e in [(30, "c"), (10, "a"), (20, "b")]:
...     _ = buffer.push(t, e, {"v": t})
>>> [e for _, e, _ in buffer.release(watermark_ms=20)]
['a', 'b']
>>> buffer.push(15, "x", {}), buffer.late_dropped
(False, 1)
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from typing import Any

import numpy as np

Buffered = tuple[int, str, Any]
#: Joins event ids in `EventTimeBuffer.columns_snapshot` (and the trend window's).
ID_SEPARATOR = "\x1f"


class EventTimeBuffer:
    """Holds events until the watermark passes them; bounded by `max_events`."""

    __slots__ = ("_events", "late_dropped", "max_events", "released_until")

    def __init__(self, max_events: int = 100_000) -> None:
        self.max_events = max_events
        self._events: list[Buffered] = []
        self.released_until: int | None = None
        self.late_dropped = 0

    def __len__(self) -> int:
        return len(self._events)

    def push(self, event_time: int, event_id: str, payload: Any) -> bool:
        """Buffer one event; False (and counted) when it is older than what was released."""
        if self.released_until is not None and event_time < self.released_until:
            self.late_dropped += 1
            return False
        bisect.insort(self._events, (int(event_time), str(event_id), payload), key=_key)
        return True

    @property
    def latest_ms(self) -> int | None:
        """The latest event time held (register an event-time timer for it), or None."""
        return self._events[-1][0] if self._events else None

    def release(self, watermark_ms: int | None) -> list[Buffered]:
        """Events at or before `watermark_ms` in event-time order (all of them for None).

        When more than `max_events` are held, the oldest are released early.
        """
        if watermark_ms is None:
            cut = len(self._events)
        else:
            cut = bisect.bisect_right(self._events, (int(watermark_ms), "\U0010ffff"), key=_key)
        cut = max(cut, len(self._events) - self.max_events)
        out, self._events = self._events[:cut], self._events[cut:]
        if out:
            self.released_until = out[-1][0]
        return out

    def snapshot(self) -> dict[str, Any]:
        return {
            "events": [list(e) for e in self._events],
            "released_until": self.released_until,
            "late_dropped": self.late_dropped,
        }

    def columns_snapshot(self) -> dict[str, Any]:
        """`snapshot()` with the events as columns, for a binary store (pickle): `events` is
        (times as an int64 array, ids `ID_SEPARATOR`-joined or a list, payloads as a list).

        >>> buffer = EventTimeBuffer()
        >>> _ = buffer.push(20, "b", [2.0]), buffer.push(10, "a", [None])
        >>> again = EventTimeBuffer()
        >>> again.columns_restore(buffer.columns_snapshot())
        >>> again.release(None)
        [(10, 'a', [None]), (20, 'b', [2.0])]
        """
        events = self._events
        ids = [e[1] for e in events]
        joined = ID_SEPARATOR.join(ids)
        return {
            "events": (
                np.fromiter((e[0] for e in events), np.int64, len(events)),
                joined if joined.count(ID_SEPARATOR) == max(0, len(ids) - 1) else ids,
                [e[2] for e in events],
            ),
            "released_until": self.released_until,
            "late_dropped": self.late_dropped,
        }

    def columns_restore(self, data: Mapping[str, Any]) -> None:
        times, ids, payloads = data["events"]
        if isinstance(ids, str):
            ids = ids.split(ID_SEPARATOR) if len(times) else []
        self._events = list(zip(times.tolist(), ids, payloads, strict=True))
        until = data["released_until"]
        self.released_until = None if until is None else int(until)
        self.late_dropped = int(data["late_dropped"])

    def restore(self, data: Mapping[str, Any]) -> None:
        self._events = [(int(t), str(i), p) for t, i, p in data["events"]]
        until = data["released_until"]
        self.released_until = None if until is None else int(until)
        self.late_dropped = int(data["late_dropped"])


def _key(event: Buffered) -> tuple[int, str]:
    return event[0], event[1]
