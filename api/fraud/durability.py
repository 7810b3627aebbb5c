"""When the endpoint may answer: the `durability` setting.

- `ack` (the default): after the broker acknowledged the decision's record. The publisher
  asks for a delivery report per record and polls from a thread; each report goes into a
  deque, and after each poll the thread hands what arrived to the event loop in one
  `call_soon_threadsafe` (`AckWaiter`), which resolves the requests' futures. The event loop
  never blocks; a request waits one linger (`publisher.ACK_LINGER_MS`) plus the broker's
  round trip. A kill -9 loses nothing answered: every 200 is in the topic.
- `log`: after the record is appended to a local write-ahead log (`WriteAheadLog`) and, with
  `wal_fsync` (the default), after an `fdatasync` of it. The fsync is a group commit: one
  `fdatasync` in a worker thread covers every append made before it started, so a busy
  endpoint pays one disk flush per batch, not per request. Without `wal_fsync` the append is
  in the kernel's page cache when the answer leaves: it survives a kill -9 of the process,
  not a crash of the machine. On start the log's leftovers are replayed into Kafka (those
  whose transaction_id the state rebuilt from the topic does not know yet) and deleted once
  acknowledged. A segment is deleted as soon as every record in it is acknowledged and a
  newer segment took over (`segment_records`), so the log holds roughly the records not yet
  acknowledged.
- `none`: before the broker acknowledges (records linger `publisher.LINGER_MS` to be
  batched); a kill -9 loses the decisions answered in the last linger and round trip.

A record that fails to reach the broker (or is not acknowledged within `ack_timeout_s`) is
answered 503 with `Retry-After` under `ack`: the terminal retries, and the retry, with the
same transaction_id, gets the cached verdict once its record is acknowledged (one the broker
refused is published again by the retry, so no 200 goes out for a record not in the topic).

Each request waits on a future of its own that follows its record's (`AckWaiter.follow`),
so a request that times out or is cancelled leaves the record's future to its retries. The
timeouts are one sweep over the waiting requests, oldest first (`ack_timeout_s` is the same
for all), not a timer per request: on uvloop, a request's whole wait (future, report,
hand-over, wake-up) cost 11.5 us with `asyncio.timeout` and `asyncio.shield`, 7 us so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from api.fraud.publisher import OnAcked

log = logging.getLogger("api.durability")

#: Records per write-ahead segment before a new one is started.
SEGMENT_RECORDS = 20_000
SUFFIX = ".wal"


class NotDurable(Exception):
    """The decision's record was not acknowledged: the answer cannot be a 200."""


class AckWaiter:
    """Futures on the event loop, resolved from delivery reports.

    Two ways to serve the reports: from the publisher's poll thread (`hand_over` after each
    poll: one `call_soon_threadsafe` per batch), or, with `poll` (a non-blocking
    `producer.poll(0)`), from the event loop itself every `interval_s` while any request
    waits (`poll` runs the callbacks on the loop thread: no second thread contends for the
    GIL, no cross-thread wake-up; the loop never blocks, and an idle endpoint never polls
    this fast)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        poll: Callable[[], None] | None = None,
        interval_s: float = 0.001,
        timeout_s: float = 10.0,
    ) -> None:
        self._loop = loop
        self._reports: deque[tuple[asyncio.Future[str | None], str | None]] = deque()
        self._poll = poll
        self._interval_s = interval_s
        self._ticking = False
        self.waiting = 0
        self.timeout_s = timeout_s
        #: (deadline, a request's own future), in the order the requests started to wait.
        self._deadlines: deque[tuple[float, asyncio.Future[str | None]]] = deque()
        self._sweep_s = min(0.1, timeout_s / 10)
        self._sweeping = False

    def waiter(self) -> tuple[asyncio.Future[str | None], OnAcked]:
        """A future (on the loop) and the callback that resolves it (from any thread)."""
        future: asyncio.Future[str | None] = self._loop.create_future()
        reports = self._reports

        def on_acked(error: str | None) -> None:
            reports.append((future, error))

        self.waiting += 1
        if self._poll is not None and not self._ticking:
            self._ticking = True
            self._loop.call_later(self._interval_s, self._tick)
        return future, on_acked

    def follow(self, acked: asyncio.Future[str | None]) -> asyncio.Future[str | None]:
        """A future of the caller's own with `acked`'s result (None: acknowledged; else why
        not), or `TimeoutError` once `timeout_s` passed first. `acked` itself is never
        cancelled or failed by a waiter: the record's retries follow it too."""
        own: asyncio.Future[str | None] = self._loop.create_future()
        acked.add_done_callback(partial(_relay, own))
        self._deadlines.append((self._loop.time() + self.timeout_s, own))
        if not self._sweeping:
            self._sweeping = True
            self._loop.call_later(self._sweep_s, self._sweep)
        return own

    def _sweep(self) -> None:
        """Fail the requests waiting longer than `timeout_s` (and drop the answered ones)."""
        deadlines, now = self._deadlines, self._loop.time()
        while deadlines:
            deadline, own = deadlines[0]
            if not own.done():
                if deadline > now:
                    break
                own.set_exception(TimeoutError())
            deadlines.popleft()
        if deadlines:
            self._loop.call_later(self._sweep_s, self._sweep)
        else:
            self._sweeping = False

    def _tick(self) -> None:
        assert self._poll is not None
        self._poll()
        self._resolve(self._drain())
        if self.waiting > 0:
            self._loop.call_later(self._interval_s, self._tick)
        else:
            self._ticking = False

    def _drain(self) -> list[tuple[asyncio.Future[str | None], str | None]]:
        reports = self._reports
        batch = []
        with contextlib.suppress(IndexError):
            while reports:
                batch.append(reports.popleft())
        return batch

    def hand_over(self) -> None:
        """From the poll thread after each poll: resolve on the loop what arrived."""
        if not self._reports:
            return
        batch = self._drain()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self._loop.call_soon_threadsafe(self._resolve, batch)

    def _resolve(self, batch: list[tuple[asyncio.Future[str | None], str | None]]) -> None:
        self.waiting -= len(batch)
        for future, error in batch:
            if not future.done():
                future.set_result(error)


def _relay(own: asyncio.Future[str | None], acked: asyncio.Future[str | None]) -> None:
    if own.done():  # timed out, or its request was cancelled
        return
    own.set_result("cancelled" if acked.cancelled() else acked.result())


class Segment:
    """One write-ahead file: records appended, acknowledged and failed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.written = 0
        self.acked = 0
        self.failed = 0
        self.closed = False  # no more appends: deletable once every record is acknowledged
        self.lock = threading.Lock()

    def on_acked(self, error: str | None) -> None:
        with self.lock:
            if error is None:
                self.acked += 1
            else:
                self.failed += 1

    def done(self) -> bool:
        with self.lock:
            return self.closed and self.failed == 0 and self.acked == self.written


class WriteAheadLog:
    """Decision records appended to `directory/<ns>.wal`, one JSON record a line."""

    def __init__(
        self, directory: Path, *, fsync: bool = True, segment_records: int = SEGMENT_RECORDS
    ) -> None:
        self.directory = directory
        self.fsync = fsync
        self.segment_records = segment_records
        directory.mkdir(parents=True, exist_ok=True)
        #: The segments a previous process left (replayed by the service on start).
        self.leftover = sorted(directory.glob(f"*{SUFFIX}"))
        self._segments: list[Segment] = []
        self._current = self._new_segment()
        self.appended = 0
        self._synced = 0
        self._dirty: set[Segment] = set()
        self._sync_task: asyncio.Task[None] | None = None

    def _new_segment(self) -> Segment:
        segment = Segment(self.directory / f"{time.time_ns():020d}{SUFFIX}")
        self._segments.append(segment)
        return segment

    def leftover_records(self) -> Iterator[bytes]:
        """The records of the leftover segments (a torn last line is skipped)."""
        for path in self.leftover:
            for line in path.read_bytes().split(b"\n"):
                if line.strip():
                    yield line

    def drop_leftover(self) -> None:
        for path in self.leftover:
            path.unlink(missing_ok=True)
        self.leftover = []

    def append(self, record: bytes) -> OnAcked:
        """Write one record (in the page cache when this returns); the callback that counts
        its acknowledgement."""
        segment = self._current
        os.write(segment.fd, record + b"\n")
        segment.written += 1
        self.appended += 1
        self._dirty.add(segment)
        if segment.written >= self.segment_records:
            segment.closed = True
            self._current = self._new_segment()
            self.collect()
        return segment.on_acked

    async def synced(self) -> None:
        """Return once every append made so far is on disk (group commit; no-op without
        fsync)."""
        if not self.fsync:
            return
        target = self.appended
        while self._synced < target:
            if self._sync_task is None:
                self._sync_task = asyncio.get_running_loop().create_task(self._sync())
            await asyncio.shield(self._sync_task)

    async def _sync(self) -> None:
        upto, dirty = self.appended, list(self._dirty)
        self._dirty.clear()
        try:
            await asyncio.to_thread(_fdatasync_all, [s.fd for s in dirty])
            self._synced = upto
        finally:
            self._sync_task = None
            self.collect()

    def collect(self) -> None:
        """Delete closed segments whose records are all acknowledged (not while a sync may be
        using their descriptors)."""
        if self._sync_task is not None:
            return
        for segment in [s for s in self._segments if s.done()]:
            self._segments.remove(segment)
            self._dirty.discard(segment)
            os.close(segment.fd)
            segment.path.unlink(missing_ok=True)

    def close(self) -> int:
        """At shutdown, after the publisher's flush: delete what is acknowledged; the records
        still not acknowledged (their segments stay, to be replayed)."""
        self._current.closed = True
        self._sync_task = None
        self.collect()
        left = sum(s.written - s.acked for s in self._segments)
        for segment in self._segments:
            os.close(segment.fd)
        self._segments = []
        return left


def _fdatasync_all(fds: list[int]) -> None:
    for fd in fds:
        os.fdatasync(fd)


def wal_directory(data_dir: Path, port: int, instance: int | None = None) -> Path:
    """Where an endpoint keeps its write-ahead log: one directory per port and instance."""
    return data_dir / "api" / (f"wal-{port}" if instance is None else f"wal-{port}-{instance}")
