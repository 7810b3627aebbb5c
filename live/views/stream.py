"""What the server-sent-event routes stream, as pure in-memory parts (no Kafka, no HTTP): the
`EventLog` of one topic's recent rows with their Kafka positions, its subscribers' bounded
queues, the event ids and the SSE framing. The tail thread of `live.consumers.feeds` publishes
into it; `api.panel.routes.stream` turns a subscription into `text/event-stream`.

Event ids are Kafka positions, not a counter of this process: the id of an event is the
position, after that event, of every partition of the topic the feed follows (the next offset
to read), written `0:124,1:457`. A client that saw the event with that id has been offered
every row at a lower offset of each partition, so resuming is "every held row at or above
those offsets", and it still means the same after the API restarts. Resuming from a position
the log no longer holds (its rows were evicted, or the tail started past it) is a *gap*: the
subscriber is told which offsets it missed (`Resume.missed`), never silently skipped ahead.

A subscriber's queue holds at most `queue_max` events. A client that reads slower than rows
land fills it; then it is dropped (`Subscriber.dropped`): its queue is emptied, nothing more is
queued, the log counts it (`EventLog.dropped`) and the route ends its stream with a `dropped`
event, so the client reconnects and resumes from its last id.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

log = logging.getLogger("live.stream")

#: An event id: partition -> the next offset to read.
Position = dict[int, int]


# -- ids and framing: pure functions -----------------------------------------------------------


def format_id(position: Mapping[int, int]) -> str:
    """`{0: 124, 1: 457}` as `0:124,1:457` (partitions in order)."""
    return ",".join(f"{p}:{o}" for p, o in sorted(position.items()))


def parse_id(text: str | None) -> Position | None:
    """The position of an id made by `format_id`; None for no id or one that is not ours
    (empty, malformed, a negative number)."""
    if not text or not text.strip():
        return None
    position: Position = {}
    for part in text.strip().split(","):
        p, sep, o = part.partition(":")
        if not sep or not p.isdigit() or not o.isdigit():
            return None
        position[int(p)] = int(o)
    return position


def frame(data: Any, *, event: str | None = None, event_id: str | None = None) -> bytes:
    """One SSE event: optional `event:` and `id:` lines, then `data:` (JSON, one line: orjson
    escapes newlines inside strings), then the blank line that ends it."""
    lines = []
    if event is not None:
        lines.append(f"event: {_one_line(event)}")
    if event_id is not None:
        lines.append(f"id: {_one_line(event_id)}")
    head = "".join(line + "\n" for line in lines).encode()
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


def comment(text: str) -> bytes:
    """An SSE comment line (a heartbeat): clients ignore it; it keeps proxies from timing out
    and tells the server a gone client at the next write."""
    return f": {_one_line(text)}\n\n".encode()


def retry(ms: int) -> bytes:
    """How long a client waits before reconnecting."""
    return f"retry: {int(ms)}\n\n".encode()


def _one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")


# -- the log and its subscribers --------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    partition: int
    offset: int
    row: dict[str, Any]
    id: str


@dataclass
class Resume:
    """Where a new subscription starts: the held events it is sent first (oldest first) and,
    resuming from an id, the offsets it missed (`partition -> (from, to)`, to exclusive) that
    the log no longer holds; `reason` says why when the id was not usable at all."""

    backlog: list[Event]
    missed: dict[int, tuple[int, int]] = field(default_factory=dict)
    reason: str | None = None
    #: The log's position when the subscription began: every later row goes to the queue.
    position: Position = field(default_factory=dict)

    @property
    def gap(self) -> bool:
        return bool(self.missed) or self.reason is not None


class Subscriber:
    """One client's bounded queue; the publisher thread fills it, the client's coroutine
    empties it (`get`). Full: `dropped` is set and the queue emptied."""

    def __init__(
        self,
        accept: Callable[[dict[str, Any]], bool],
        queue_max: int,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.accept = accept
        self.queue_max = queue_max
        #: Resuming: the position the client had; rows below it are not sent again (a tail
        #: still catching up after a restart reads them once more).
        self.after: Position = {}
        self.queue: deque[Event] = deque()
        self.dropped = False
        #: The server is stopping: the stream ends (`close`).
        self.closed = False
        self._lock = threading.Lock()
        self._loop = loop
        self._ready = asyncio.Event() if loop is not None else None

    def offer(self, event: Event) -> bool:
        """Queue `event` if the filter accepts it; False when the queue was full (dropped)."""
        if self.dropped or not self.wants(event):
            return True
        with self._lock:
            if len(self.queue) >= self.queue_max:
                self.dropped = True
                self.queue.clear()
            else:
                self.queue.append(event)
        self._wake()
        return not self.dropped

    def close(self) -> None:
        """End the stream at its next wait (safe from a signal handler or another thread)."""
        self.closed = True
        self._wake()

    def wants(self, event: Event) -> bool:
        return event.offset >= self.after.get(event.partition, 0) and self.accept(event.row)

    def _wake(self) -> None:
        if self._loop is not None and self._ready is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: the client is gone
                self._loop.call_soon_threadsafe(self._ready.set)

    def take(self) -> list[Event]:
        """Every queued event, oldest first (the queue emptied)."""
        with self._lock:
            events = list(self.queue)
            self.queue.clear()
        return events

    async def get(self, timeout_s: float) -> list[Event]:
        """The queued events, waiting up to `timeout_s` for one; [] on timeout or when
        dropped (see `dropped`)."""
        if self._ready is None:
            raise RuntimeError("get needs a Subscriber made with its event loop")
        events = self.take()
        if events or self.dropped or self.closed:
            return events
        self._ready.clear()
        events = self.take()  # one queued between take and clear
        if events:
            return events
        try:
            await asyncio.wait_for(self._ready.wait(), timeout_s)
        except TimeoutError:
            return []
        return [] if self.closed else self.take()


class EventLog:
    """The newest `keep` rows of one topic with their partition and offset, the position the
    tail has read to, and the subscribers to push new rows to."""

    def __init__(self, keep: int = 1000) -> None:
        self.keep = keep
        self._events: deque[Event] = deque()
        #: Per partition: the lowest offset from which the log holds every row (rows below it
        #: were evicted, or read before the tail started).
        self._floor: Position = {}
        #: Per partition: the next offset the tail reads.
        self._position: Position = {}
        self._subscribers: set[Subscriber] = set()
        self._lock = threading.Lock()
        self.published = 0
        self.dropped = 0

    # -- the tail's side ----------------------------------------------------------------------

    def cover(self, partition: int, start: int) -> None:
        """The tail starts reading `partition` at `start`: held from there on."""
        with self._lock:
            self._floor.setdefault(partition, start)
            self._position.setdefault(partition, start)

    def advance(self, partition: int, offset: int) -> None:
        """A record at `offset` was read but is no row of this log (malformed, another
        schema): the position moves past it."""
        with self._lock:
            self._floor.setdefault(partition, offset)
            self._position[partition] = max(self._position.get(partition, 0), offset + 1)

    def publish(self, partition: int, offset: int, row: dict[str, Any]) -> Event | None:
        """Append the row read at `offset`, evicting the oldest beyond `keep`, and offer it to
        every subscriber; a subscriber whose queue is full is dropped (counted, logged). A row
        below the position (read again after the tail thread restarted) is not published
        twice: None."""
        with self._lock:
            if offset < self._position.get(partition, 0):
                return None
            self._floor.setdefault(partition, offset)
            self._position[partition] = max(self._position.get(partition, 0), offset + 1)
            event = Event(partition, offset, row, format_id(self._position))
            self._events.append(event)
            while len(self._events) > self.keep:
                old = self._events.popleft()
                self._floor[old.partition] = max(self._floor[old.partition], old.offset + 1)
            self.published += 1
            subscribers = list(self._subscribers)
        for sub in subscribers:
            if not sub.offer(event) and self._forget(sub):
                self.dropped += 1
                log.warning(
                    "stream client dropped: %d events queued and not read (queue_max)",
                    sub.queue_max,
                )
        return event

    def _forget(self, sub: Subscriber) -> bool:
        with self._lock:
            if sub in self._subscribers:
                self._subscribers.remove(sub)
                return True
            return False

    # -- the clients' side --------------------------------------------------------------------

    def position(self) -> str:
        """The id of "now": resuming from it sends only rows read after this call."""
        with self._lock:
            return format_id(self._position)

    @property
    def held(self) -> int:
        with self._lock:
            return len(self._events)

    @property
    def subscribers(self) -> int:
        with self._lock:
            return len(self._subscribers)

    def subscribe(
        self,
        sub: Subscriber,
        last_id: str | None = None,
        backlog: int = 0,
    ) -> Resume:
        """Register `sub` and say what to send it first: resuming from `last_id` (a
        `Last-Event-ID`), every held row after it that `sub` accepts, with what was missed;
        without one, the newest `backlog` rows it accepts. Atomic with `publish`: no row
        falls between the backlog and the queue."""
        seen = parse_id(last_id)
        if seen is not None:
            sub.after = seen
        with self._lock:
            held = list(self._events)
            floor = dict(self._floor)
            position = dict(self._position)
            self._subscribers.add(sub)
        if seen is None:
            fresh = newest((e for e in held if sub.accept(e.row)), backlog)
            if last_id is None or not last_id.strip():
                return Resume(fresh, position=position)
            return Resume(
                fresh,
                reason=f"Last-Event-ID {last_id[:80]!r} is no id of this stream "
                "(partition:offset,...): starting from the newest rows",
                position=position,
            )
        return Resume(
            [e for e in held if sub.wants(e)], resume_gaps(seen, floor), position=position
        )

    def unsubscribe(self, sub: Subscriber) -> None:
        self._forget(sub)


def resume_gaps(seen: Mapping[int, int], floor: Mapping[int, int]) -> dict[int, tuple[int, int]]:
    """Per partition, the offsets `[from, to)` a client at position `seen` missed: those
    below the lowest offset the log holds every row from. A partition the id does not name
    counts from offset 0."""
    return {p: (seen.get(p, 0), low) for p, low in sorted(floor.items()) if seen.get(p, 0) < low}


def newest(events: Iterable[Event], limit: int) -> list[Event]:
    """The last `limit` of `events` (oldest first)."""
    found = list(events)
    return found[len(found) - limit :] if limit > 0 else []
