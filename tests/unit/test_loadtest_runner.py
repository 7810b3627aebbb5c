"""Open-model accounting: latency from the INTENDED send time (no coordinated omission), the
in-flight bound counted and never skipping a request, timeouts and lost connections counted.

The servers here are in-process asyncio servers with scripted behaviour: a serial server with a
fixed service time shows a queue building up, which latency from the actual send would hide.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httptools
import numpy as np
import pytest
import uvloop

from core.errors import StreamsimError
from streamsim.loadtest.connection import post_request, request_head
from streamsim.loadtest.recorder import ERROR, GOOD, Recorder
from streamsim.loadtest.runner import OpenLoopRunner, RunResult

OK = b"HTTP/1.1 200 OK\r\ncontent-length: 21\r\n\r\n" + b'{"decision":"review"}'


class ScriptedServer(asyncio.Protocol):
    """Answers one request at a time across ALL connections (`service_s` each), in arrival
    order; a body containing `hang` is never answered, `close` drops the connection."""

    busy_until = 0.0
    service_s = 0.0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.parser = httptools.HttpRequestParser(self)
        self.body = b""

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        body, self.body = self.body, b""
        if b"close" in body:
            self.transport.close()
            return
        if b"hang" in body:
            return
        loop = asyncio.get_running_loop()
        cls = type(self)
        cls.busy_until = max(cls.busy_until, loop.time()) + cls.service_s
        loop.call_at(cls.busy_until, self._answer)

    def _answer(self) -> None:
        if not self.transport.is_closing():
            self.transport.write(OK)


def run(
    bodies: list[bytes],
    times: np.ndarray,
    *,
    service_s: float = 0.0,
    connections: int = 1,
    max_in_flight: int = 100,
    timeout_s: float = 5.0,
    warmup_s: float = 0.0,
    expect_422: np.ndarray | None = None,
) -> RunResult:
    async def main() -> RunResult:
        ScriptedServer.busy_until, ScriptedServer.service_s = 0.0, service_s
        loop = asyncio.get_running_loop()
        server = await loop.create_server(ScriptedServer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        head = request_head(url, "/v1/transactions")
        expect = np.zeros(len(times), bool) if expect_422 is None else expect_422
        runner = OpenLoopRunner(
            url,
            [post_request(head, b) for b in bodies],
            times,
            Recorder(times, expect, warmup_s),
            connections=connections,
            max_in_flight=max_in_flight,
            timeout_s=timeout_s,
        )
        try:
            return await runner.run()
        finally:
            server.close()

    return uvloop.run(main())


def test_recorder_times_from_the_intended_start() -> None:
    times = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    expect = np.array([False, False, True, False, True, False])
    rec = Recorder(times, expect, warmup_s=0.5)
    rec.answered(0, 500, 0.3)  # warm-up: tracked, not counted
    rec.answered(1, 200, 1.25, b"approve")  # sent late or not: 250 ms from intended
    rec.answered(2, 422, 2.010)  # expected 422: good
    rec.answered(3, 422, 3.5)  # a 422 to a valid body: error
    rec.answered(4, 201, 4.002)  # an invalid body accepted: error
    rec.failed(5, "timeout", 15.0)
    assert rec.requests == 5
    assert rec.latency_s[1] == pytest.approx(0.25)
    assert dict(rec.errors) == {"status_422": 1, "accepted_invalid": 1, "timeout": 1}
    assert dict(rec.warmup_errors) == {"status_500": 1}
    assert rec.outcome.tolist() == [ERROR, GOOD, GOOD, ERROR, ERROR, ERROR]
    assert rec.histogram.get_total_count() == 4  # answers only, warm-up excluded
    lat = rec.latency_ms()
    assert lat["max"] == pytest.approx(500, rel=1e-3) and lat["p50"] == pytest.approx(10, rel=1e-3)
    assert rec.good_in_window(0.5, 6.0) == 2
    assert dict(rec.decisions) == {"approve": 1}


def test_a_queue_at_a_slow_server_shows_in_the_latency() -> None:
    # 50 requests at 50/s to a server needing 40 ms each: it falls 20 ms further behind with
    # every request. From the actual send every answer took ~40 ms; from the intended send,
    # request k waited ~20 ms * k more.
    times = np.arange(50) / 50.0
    result = run([b'{"x":"ok"}'] * 50, times, service_s=0.04)
    rec = result.recorder
    assert (rec.outcome == GOOD).all()
    k = np.arange(50)
    assert np.all(rec.latency_s >= 0.02 * k + 0.035)
    assert rec.latency_ms()["max"] >= 1000
    # What a tool with coordinated omission would have reported: the service time only.
    from_send = rec.latency_from_send_ms()
    assert from_send["p50"] is not None and from_send["p50"] >= 35
    assert from_send["p50"] < rec.latency_ms()["p50"] / 4
    assert result.waited_for_connection >= 40  # the one connection was busy


def test_the_in_flight_bound_pauses_sending_counts_it_and_skips_nothing() -> None:
    times = np.arange(30) / 200.0
    result = run([b'{"x":"ok"}'] * 30, times, service_s=0.02, max_in_flight=3)
    rec = result.recorder
    assert result.in_flight_limit_hits > 0
    assert result.max_in_flight == 3
    assert (rec.outcome == GOOD).all() and rec.histogram.get_total_count() == 30
    assert rec.finished == 30
    assert rec.latency_s[-1] >= 30 * 0.02 - times[-1] - 0.01  # still from its intended time


def test_timeouts_and_dropped_connections_are_errors_by_kind() -> None:
    bodies = [b'{"x":"ok"}'] * 12
    bodies[3] = b'{"x":"hang"}'
    bodies[7] = b'{"x":"close"}'
    times = np.arange(12) / 20.0
    result = run(bodies, times, connections=2, timeout_s=0.3)
    rec = result.recorder
    assert dict(rec.errors) == {"timeout": 1, "connection": 1}
    assert rec.outcome[3] == ERROR and rec.outcome[7] == ERROR
    assert np.count_nonzero(rec.outcome == GOOD) == 10  # reconnected and carried on


def test_warm_up_requests_are_left_out() -> None:
    times = np.arange(20) / 20.0
    result = run([b'{"x":"ok"}'] * 20, times, warmup_s=0.5)
    rec = result.recorder
    assert rec.first_measured == 10 and rec.requests == 10
    assert rec.histogram.get_total_count() == 10


def test_nothing_listening_is_a_clear_error() -> None:
    async def main() -> None:
        times = np.zeros(1)
        runner = OpenLoopRunner(
            "http://127.0.0.1:9",
            [b""],
            times,
            Recorder(times, np.zeros(1, bool), 0),
            connections=2,
            max_in_flight=2,
            timeout_s=1,
        )
        await runner.run()

    with pytest.raises(StreamsimError, match=r"cannot connect to http://127\.0\.0\.1:9"):
        uvloop.run(main())
