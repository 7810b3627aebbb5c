"""Closed-loop saturation: N keep-alive connections, each sending its next request as soon as
the previous answer arrives, for a fixed time after a warm-up. For throughput ceilings
(`bench api`); latency here is per request from its actual send (a closed loop has no intended
times), which is why load tests use the open model instead.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from hdrh.histogram import HdrHistogram

from core.errors import StreamsimError
from streamsim.loadtest.connection import Connection, describe, host_port, open_connection
from streamsim.loadtest.recorder import HIGHEST_US, LOWEST_US, SIGNIFICANT_DIGITS


@dataclass(frozen=True)
class Saturation:
    requests: int  # answers completed in the measured window (after the warm-up)
    requests_per_s: float
    latency_ms: dict[str, float]
    statuses: dict[int, int]
    errors: int  # non-2xx answers and lost connections in the window
    total_requests: int  # answers over the whole run, warm-up included
    client_cpu_s: float  # this process's CPU time over the whole run (warm-up included)
    elapsed_s: float


async def saturate(
    url: str,
    next_request: Callable[[], bytes],
    *,
    connections: int,
    warmup_s: float,
    duration_s: float,
) -> Saturation:
    host, port = host_port(url)
    histogram = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
    statuses: Counter[int] = Counter()
    clock = time.perf_counter
    state = {"completed": 0, "errors": 0, "open": 0, "total": 0}
    loop = asyncio.get_running_loop()
    finished: asyncio.Future[None] = loop.create_future()
    t0 = 0.0
    window = (0.0, 0.0)

    def retire() -> None:
        state["open"] -= 1
        if state["open"] == 0 and not finished.done():
            finished.set_result(None)

    def on_response(conn: Connection, status: int, _: bytes | None, keep_alive: bool) -> None:
        now = clock() - t0
        state["total"] += 1
        if window[0] <= now < window[1]:
            state["completed"] += 1
            statuses[status] += 1
            if not 200 <= status < 300:
                state["errors"] += 1
            us = round((now - conn.sent_at) * 1e6)
            histogram.record_value(min(max(us, LOWEST_US), HIGHEST_US))
        conn.slot = -1
        if now < window[1] and keep_alive:
            conn.send(0, next_request(), clock() - t0)
        else:
            conn.abort()
            retire()

    def on_lost(conn: Connection, exc: Exception | None) -> None:
        if conn.slot >= 0 and clock() - t0 < window[1]:
            state["errors"] += 1
        retire()

    conns: list[Connection] = []
    try:
        for _ in range(connections):
            conns.append(
                await open_connection(host, port, lambda: Connection(on_response, on_lost))
            )
    except OSError as exc:
        for conn in conns:
            conn.abort()
        raise StreamsimError(f"cannot connect to {url}: {describe(exc)}") from None
    state["open"] = len(conns)
    cpu0 = time.process_time()
    t0 = clock()
    window = (warmup_s, warmup_s + duration_s)
    for conn in conns:
        conn.send(0, next_request(), 0.0)
    try:
        await asyncio.wait_for(finished, timeout=warmup_s + duration_s + 30)
    except TimeoutError:
        raise StreamsimError(f"{url} stopped answering during the saturation run") from None
    finally:
        for conn in conns:
            conn.abort()
    elapsed = clock() - t0

    def at(percentile: float) -> float:
        return round(histogram.get_value_at_percentile(percentile) / 1000, 3)

    completed = state["completed"]
    return Saturation(
        requests=completed,
        requests_per_s=completed / duration_s,
        latency_ms={"p50": at(50), "p99": at(99)} if completed else {},
        statuses=dict(statuses),
        errors=state["errors"],
        total_requests=state["total"],
        client_cpu_s=time.process_time() - cpu0,
        elapsed_s=elapsed,
    )
