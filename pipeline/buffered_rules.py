"""Rules per entity in event-time order: an entity's buffer and rule states, and their factory.

`BufferedRules` holds one entity's (sensor's, vehicle's) state: an `EventTimeBuffer` of its
not-yet-released events and the rule states a subclass feeds (`feed`). Events are buffered as
they arrive and fed to the rules only when the watermark passes them, in (event_time,
event_id) order, so the alerts are those of the event-time-sorted stream whatever the arrival
order, and a restarted query reproduces them. The cost is latency: an event is judged once
the watermark passes it. Its stored form (`to_bytes`) is a pickled snapshot whose histories
are columns (numpy arrays and joined id strings), not JSON rows.

`RulesFactory` says what an entity's rules are built from and which input columns they read;
`pipeline.bucketed_rules` runs them in `applyInPandasWithState`, per bucket of entities,
with an event-time timeout on a `timer_grid_ms` grid (10 s of event time) for entities gone
quiet: a quiet entity's last events are judged up to 10 s of event time later. With nothing
buffered, an entity is forgotten `ttl_ms` of event time after its latest event.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson
import pandas as pd

from detectors import Alert, EventTimeBuffer


def dump_json(data: Mapping[str, Any]) -> str:
    """`json.dumps(data, separators=(",", ":"))` but faster (orjson) where that reads back
    the same: orjson writes NaN and infinities as null (and tuples as lists), json as NaN and
    Infinity, so a snapshot that does not read back equal is written by json as before.

    >>> dump_json({"a": [1, 2.5, None]}), dump_json({"a": [float("inf")]})
    ('{"a":[1,2.5,null]}', '{"a":[Infinity]}')
    """
    text = orjson.dumps(data)
    if orjson.loads(text) == data:
        return text.decode()
    return json.dumps(data, separators=(",", ":"))


def load_json(text: str) -> Any:
    """`json.loads(text)`, by orjson where it can (it rejects NaN and Infinity: json then).

    >>> load_json('{"a":[1,2.5,null]}'), load_json('{"a":[Infinity]}')
    ({'a': [1, 2.5, None]}, {'a': [inf]})
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def input_rows(frame: pd.DataFrame, columns: Sequence[str]) -> list[list[Any]]:
    """`frame`'s `columns` as rows of Python values, by one `to_numpy` of the whole frame.

    A key's frame is new in every call (Spark builds it from the key's rows), and pandas
    builds a Series on the first read of each column, which costs more than the rules when
    a key has a few rows; one conversion of the whole frame does not.

    >>> input_rows(pd.DataFrame({"b": [1, 2], "a": ["x", "y"]}), ["a", "b"])
    [['x', 1], ['y', 2]]
    """
    where = [frame.columns.get_loc(name) for name in columns]
    return [[row[i] for i in where] for row in frame.to_numpy(dtype=object).tolist()]


class BufferedRules:
    """One entity's buffered events and rule states (subclasses: `feed` and the snapshots).

    >>> class Echo(BufferedRules):
    ...     def feed(self, event_id, event_time, payload):
    ...         return [Alert.make("echo", "e1", event_time, [event_id], {}, [event_id])]
    >>> rules = Echo()
    >>> rules.push("b", 2_000, []), rules.push("a", 1_000, [])
    (True, True)
    >>> [a.event_ids for a in rules.release(watermark_ms=1_500)]
    [('a',)]
    >>> rules.push("late", 500, []), rules.next_timer(ttl_ms=None)
    (False, 2000)
    """

    __slots__ = ("buffer", "earliest_ms", "latest_ms")

    def __init__(self, max_buffered: int = 10_000) -> None:
        self.buffer = EventTimeBuffer(max_buffered)
        self.latest_ms: int | None = None  # the latest event time ever pushed
        self.earliest_ms: int | None = None  # the earliest event time buffered

    def feed(self, event_id: str, event_time: int, payload: Any) -> list[Alert]:
        """Run the rules on one released event, in event-time order."""
        raise NotImplementedError

    def push(self, event_id: str, event_time: int, payload: Any) -> bool:
        """Buffer an event until the watermark passes it; False when it is already too late."""
        time_ms = int(event_time)
        if not self.buffer.push(time_ms, str(event_id), payload):
            return False
        self.latest_ms = time_ms if self.latest_ms is None else max(time_ms, self.latest_ms)
        self.earliest_ms = time_ms if self.earliest_ms is None else min(time_ms, self.earliest_ms)
        return True

    def release(self, watermark_ms: int | None) -> list[Alert]:
        """Feed the rules every event at or before the watermark, in event-time order."""
        alerts: list[Alert] = []
        released = self.buffer.release(watermark_ms)
        for event_time, event_id, payload in released:
            alerts.extend(self.feed(event_id, event_time, payload))
        if released:
            held = self.buffer.snapshot()["events"]
            self.earliest_ms = int(held[0][0]) if held else None
        return alerts

    def next_timer(self, ttl_ms: int | None) -> int | None:
        """When this entity needs its timer: the earliest buffered event, else its expiry."""
        if self.earliest_ms is not None:
            return self.earliest_ms
        if ttl_ms is None or self.latest_ms is None:
            return None
        return self.latest_ms + ttl_ms

    @property
    def buffered(self) -> int:
        return len(self.buffer)

    def expired(self, watermark_ms: int, ttl_ms: int | None) -> bool:
        """Nothing buffered and the watermark `ttl_ms` past the latest event: forget it."""
        if ttl_ms is None or self.buffered or self.latest_ms is None:
            return False
        return watermark_ms >= self.latest_ms + ttl_ms

    def rules_snapshot(self) -> dict[str, Any]:
        """The rule states, JSON-able (keys of the snapshot beside the buffer's)."""
        return {}

    def rules_restore(self, data: Mapping[str, Any]) -> None:
        return None

    def rules_columns_snapshot(self) -> dict[str, Any]:
        """`rules_snapshot` for a binary store: histories as columns (default: the same)."""
        return self.rules_snapshot()

    def rules_columns_restore(self, data: Mapping[str, Any]) -> None:
        self.rules_restore(data)

    def to_bytes(self) -> bytes:
        """The state as the processor stores it: pickled, histories as columns (`to_json`'s
        content, and cheaper both ways)."""
        return pickle.dumps(
            {
                "buffer": self.buffer.columns_snapshot(),
                "latest_ms": self.latest_ms,
                "earliest_ms": self.earliest_ms,
                **self.rules_columns_snapshot(),
            },
            protocol=pickle.HIGHEST_PROTOCOL,
        )

    def load_bytes(self, blob: bytes) -> None:
        data: Mapping[str, Any] = pickle.loads(blob)  # our own state store
        self.buffer.columns_restore(data["buffer"])
        self.latest_ms = data.get("latest_ms")
        self.earliest_ms = data.get("earliest_ms")
        self.rules_columns_restore(data)

    def to_json(self) -> str:
        return dump_json(
            {
                "buffer": self.buffer.snapshot(),
                "latest_ms": self.latest_ms,
                "earliest_ms": self.earliest_ms,
                **self.rules_snapshot(),
            }
        )

    def load_json(self, text: str) -> None:
        data: Mapping[str, Any] = load_json(text)
        self.buffer.restore(data["buffer"])
        self.latest_ms = data.get("latest_ms")
        self.earliest_ms = data.get("earliest_ms")
        self.rules_restore(data)


class RulesFactory:
    """What an entity's `BufferedRules` are made from, for `pipeline.bucketed_rules`.

    Subclasses say which columns an input row has (`input_columns`, beyond the entity's key,
    starting with `event_id` and `event_time`) and build an entity's rules (`new_rules`).
    """

    input_columns: Sequence[str] = ("event_id", "event_time")

    timer_grid_ms = 10_000  # event-time timers sit on this grid (see the module docstring)

    def __init__(self, ttl_ms: int | None = None) -> None:
        self.ttl_ms = ttl_ms

    def new_rules(self, key: str) -> BufferedRules:
        raise NotImplementedError

    def payloads(self, frame: pd.DataFrame) -> Iterator[tuple[Any, Any, Any]]:
        """(event_id, event_time, payload) per input row; the payload is what `push` keeps."""
        for event_id, event_time, *values in input_rows(frame, self.input_columns):
            yield event_id, event_time, values
