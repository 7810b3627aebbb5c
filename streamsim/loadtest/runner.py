"""The open-model run: every request sent at its intended time, whether or not earlier ones
have finished, over a pool of keep-alive connections.

- The intended send times are precomputed (`shapes.send_times`); a dispatcher wakes at each,
  hands the request to an idle connection or, when all are busy, queues it for the next free
  one. Latency is always counted from the intended time (`recorder.Recorder`).
- `client.max_in_flight` bounds requests due but unanswered. At the bound the dispatcher waits
  for one to finish, and each such wait is counted (`in_flight_limit_hits`, an SLO); no
  request is ever skipped, and the late ones are still timed from their intended time.
- A request unanswered `timeout_s` after its intended time is a `timeout` error: dropped from
  the queue, or its connection aborted and reopened. The run ends when every request is
  answered or has failed.
- `generator_lag` is how late the dispatcher itself got to each request (CPU starvation of the
  generator); reported so a late generator is not mistaken for a slow server.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from core.errors import StreamsimError
from streamsim.loadtest.connection import Connection, describe, host_port, open_connection
from streamsim.loadtest.recorder import Recorder

SWEEP_S = 0.02
RECONNECT_BACKOFF_S = (0.05, 1.0)


@dataclass
class RunResult:
    recorder: Recorder
    started_at: float  # epoch seconds of t = 0
    elapsed_s: float
    in_flight_limit_hits: int
    max_in_flight: int  # the most requests due but unanswered at once
    waited_for_connection: int  # measured requests that found every connection busy
    connect_failures: int
    generator_lag_s: np.ndarray  # per slot: dispatch time - intended time


class OpenLoopRunner:
    def __init__(
        self,
        url: str,
        requests: list[bytes],
        times_s: np.ndarray,
        recorder: Recorder,
        *,
        connections: int,
        max_in_flight: int,
        timeout_s: float,
        read_decision: bool = True,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if len(requests) != len(times_s):
            raise ValueError("one request per intended send time")
        self.host, self.port = host_port(url)
        self.url = url
        self.requests = requests
        self.times = times_s.tolist()
        self.recorder = recorder
        self.connections = connections
        self.max_in_flight = max_in_flight
        self.timeout_s = timeout_s
        self.read_decision = read_decision
        self.clock = clock

        self.t0 = 0.0
        self.conns: set[Connection] = set()
        self.idle: list[Connection] = []
        self.pending: deque[int] = deque()
        self.in_flight = 0
        self.peak_in_flight = 0
        self.limit_hits = 0
        self.waited = 0
        self.connect_failures = 0
        self.lag = np.full(len(self.times), np.nan)
        self.dispatched = 0
        self.stopping = False
        self._room: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # life cycle
    async def run(self) -> RunResult:
        loop = asyncio.get_running_loop()
        opened = await asyncio.gather(
            *(self._connect() for _ in range(self.connections)), return_exceptions=True
        )
        failures = [r for r in opened if isinstance(r, BaseException)]
        if len(failures) == len(opened):
            raise StreamsimError(
                f"cannot connect to {self.url} ({describe(failures[0])}): is the endpoint "
                "running? (`streamsim api`, or set target.url)"
            )
        self.connect_failures += len(failures)
        for conn in opened:
            if isinstance(conn, Connection):
                self.idle.append(conn)
        started_at = time.time()
        self.t0 = self.clock()
        sweeper = asyncio.create_task(self._sweep())
        try:
            await self._dispatch()
            if self.in_flight:
                self._drained = loop.create_future()
                await self._drained
        finally:
            self.stopping = True
            sweeper.cancel()
            for task in list(self._tasks):
                task.cancel()
            for conn in list(self.conns):
                conn.abort()
        return RunResult(
            recorder=self.recorder,
            started_at=started_at,
            elapsed_s=self.clock() - self.t0,
            in_flight_limit_hits=self.limit_hits,
            max_in_flight=self.peak_in_flight,
            waited_for_connection=self.waited,
            connect_failures=self.connect_failures,
            generator_lag_s=self.lag,
        )

    def now(self) -> float:
        return self.clock() - self.t0

    async def _dispatch(self) -> None:
        loop = asyncio.get_running_loop()
        times, n, i = self.times, len(self.times), 0
        while i < n:
            now = self.now()
            if times[i] > now:
                await asyncio.sleep(times[i] - now)
                continue
            while i < n and times[i] <= now:
                if self.in_flight >= self.max_in_flight:
                    self.limit_hits += 1
                    self._room = loop.create_future()
                    await self._room
                    now = self.now()
                self.lag[i] = now - times[i]
                self._submit(i, now)
                i += 1
                self.dispatched = i

    def _submit(self, slot: int, now: float) -> None:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        if self.idle:
            self.idle.pop().send(slot, self.requests[slot], now)
        else:
            if slot >= self.recorder.first_measured:
                self.waited += 1
            self.pending.append(slot)

    def _finished(self) -> None:
        self.in_flight -= 1
        room = self._room
        if room is not None and not room.done() and self.in_flight < self.max_in_flight:
            room.set_result(None)
        drained = self._drained
        if self.in_flight == 0 and drained is not None and not drained.done():
            drained.set_result(None)

    def _next(self, conn: Connection, now: float) -> None:
        if self.pending:
            slot = self.pending.popleft()
            conn.send(slot, self.requests[slot], now)
        else:
            self.idle.append(conn)

    # connection callbacks
    def _on_response(
        self, conn: Connection, status: int, decision: bytes | None, keep_alive: bool
    ) -> None:
        now = self.now()
        slot, conn.slot = conn.slot, -1
        if slot < 0:
            return  # nothing was asked on it (cannot happen with a well-behaved server)
        self.recorder.answered(slot, status, now, decision, conn.sent_at)
        self._finished()
        if keep_alive:
            self._next(conn, now)
        else:
            self._drop(conn)

    def _on_lost(self, conn: Connection, exc: Exception | None) -> None:
        if conn.slot >= 0:
            self.recorder.failed(conn.slot, "connection", self.now())
            conn.slot = -1
            self._finished()
        self._drop(conn)

    def _drop(self, conn: Connection) -> None:
        """Forget a connection and open another in its place."""
        conn.abort()
        self.conns.discard(conn)
        if conn in self.idle:
            self.idle.remove(conn)
        if not self.stopping:
            task = asyncio.create_task(self._reconnect())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _connect(self) -> Connection:
        conn = await open_connection(
            self.host,
            self.port,
            lambda: Connection(self._on_response, self._on_lost, self.read_decision),
        )
        self.conns.add(conn)
        return conn

    async def _reconnect(self) -> None:
        delay = RECONNECT_BACKOFF_S[0]
        while not self.stopping:
            try:
                conn = await self._connect()
            except OSError:
                self.connect_failures += 1
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_BACKOFF_S[1])
                continue
            self._next(conn, self.now())
            return

    async def _sweep(self) -> None:
        """Fail what is still unanswered `timeout_s` after its intended time."""
        times = self.times
        while True:
            await asyncio.sleep(SWEEP_S)
            now = self.now()
            limit = now - self.timeout_s
            while self.pending and times[self.pending[0]] < limit:
                self.recorder.failed(self.pending.popleft(), "timeout", now)
                self._finished()
            for conn in list(self.conns):
                if conn.slot >= 0 and times[conn.slot] < limit:
                    self.recorder.failed(conn.slot, "timeout", now)
                    conn.slot = -1
                    self._finished()
                    self._drop(conn)
