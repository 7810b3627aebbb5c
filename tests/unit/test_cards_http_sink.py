"""POS mode's HTTP sink against a mock transport: order, bounded concurrency, retries, and every
non-2xx or error counted and surfaced (422 bodies included, PAN-scrubbed); truth to the inner
sink. And the scenario's wiring: request bodies the endpoint's model accepts, the default URL."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import orjson
import pytest

from api.fraud.models import TransactionRequest
from core.config import StackConfig
from scenarios.cards.config import CardsDomain
from scenarios.cards.scenario import CardsScenario, endpoint_url
from scenarios.catalog import ScenarioConfig
from simulators import Engine
from simulators.sinks import MemorySink, Records, Topics
from simulators.sinks.http import HttpEventSink

URL = "http://pos.test/v1/transactions"
TOPICS = Topics("cards.transactions", "truth.cards")
PAN = "4111111111111111"
SERVER_S = 0.002
#: How long the first request waits for a second one in flight (generous: it comes at once).
OVERLAP_WAIT_S = 10.0


def records(n: int) -> Records:
    return Records(
        [b"k"] * n,
        [orjson.dumps({"transaction_id": f"t{i}", "card_number": PAN}) for i in range(n)],
        list(range(n)),
    )


def run_sink(handler: Any, n: int, **kwargs: Any) -> tuple[HttpEventSink, MemorySink, Any]:
    inner = MemorySink()
    sink = HttpEventSink(inner, URL, transport=httpx.MockTransport(handler), **kwargs)
    sink.open(TOPICS)
    sink.write(records(n), records(n))
    report = sink.close()
    return sink, inner, report


def verdict(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"decision": "approve"})


def test_every_event_is_posted_and_truth_goes_to_the_inner_sink() -> None:
    seen: list[bytes] = []
    lock = threading.Lock()

    def handler(request: httpx.Request) -> httpx.Response:
        with lock:
            seen.append(request.content)
        assert request.headers["content-type"] == "application/json"
        time.sleep(SERVER_S)  # the endpoint's time, which every request's latency includes
        return verdict(request)

    _, inner, report = run_sink(handler, 50, concurrency=1)
    assert seen == records(50).values  # one worker: exactly the emit order
    assert inner.events.values == [] and inner.truth.values == records(50).values
    assert report.failed == 0 and report.errors == []
    http = report.details["http"]
    assert http["requests"] == http["ok"] == 50
    assert http["status"] == {"200": 50} and http["decisions"] == {"approve": 50}
    latency = http["latency_ms"]
    # each request took at least the endpoint's time (a sleep lasts at least as long as asked)
    assert SERVER_S * 1000 <= latency["p50"] <= latency["p99"] <= latency["max"]


def test_in_flight_requests_are_bounded_by_the_concurrency() -> None:
    state = {"now": 0, "max": 0}
    lock = threading.Lock()
    overlapped = threading.Event()  # two requests were in flight at once

    def handler(request: httpx.Request) -> httpx.Response:
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
            if state["now"] >= 2:
                overlapped.set()
        # The first request waits for a second one in flight, not for the clock (a serial sink
        # never sends one: the wait ends at its deadline and the check below fails).
        if orjson.loads(request.content)["transaction_id"] == "t0":
            overlapped.wait(OVERLAP_WAIT_S)
        time.sleep(0.005)
        with lock:
            state["now"] -= 1
        return verdict(request)

    _, _, report = run_sink(handler, 80, concurrency=4)
    assert report.details["http"]["ok"] == 80
    assert overlapped.is_set() and 2 <= state["max"] <= 4, state


def test_rejections_are_counted_and_surfaced_without_the_pan() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        if body["transaction_id"] in ("t3", "t7"):
            detail = [{"loc": ["body", "amount"], "msg": "bad", "input": PAN}]
            return httpx.Response(422, json={"detail": detail})
        return verdict(request)

    _, _, report = run_sink(handler, 10)
    assert report.failed == 2
    assert report.details["http"]["status"] == {"200": 8, "422": 2}
    assert any("HTTP 422 (2 requests)" in e for e in report.errors)
    assert any('"amount"' in e for e in report.errors)  # the field-level message is kept
    assert all(PAN not in e for e in report.errors)


def test_server_errors_and_connection_errors_are_retried_then_counted() -> None:
    calls: dict[str, int] = {}
    lock = threading.Lock()

    def handler(request: httpx.Request) -> httpx.Response:
        tid = orjson.loads(request.content)["transaction_id"]
        with lock:
            calls[tid] = calls.get(tid, 0) + 1
            n = calls[tid]
        if tid == "t0" and n == 1:
            return httpx.Response(503)
        if tid == "t1" and n <= 2:
            raise httpx.ConnectError("refused", request=request)
        if tid == "t2":
            raise httpx.ConnectError("refused", request=request)
        return verdict(request)

    _, _, report = run_sink(handler, 4, retries=2)
    http = report.details["http"]
    assert calls == {"t0": 2, "t1": 3, "t2": 3, "t3": 1}
    assert http["ok"] == 3 and http["failed"] == report.failed == 1
    assert http["retried"] == 1 + 2 + 2
    assert any("ConnectError" in e for e in report.errors)


def test_pos_mode_requests_are_valid_endpoint_bodies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMSIM_PAN_SECRET", "unit-test-pan-secret-0123456789")
    bodies: list[bytes] = []
    lock = threading.Lock()

    def handler(request: httpx.Request) -> httpx.Response:
        with lock:
            bodies.append(request.content)
        return verdict(request)

    cfg = ScenarioConfig.model_validate(
        {
            "entities": 300,
            "duration_s": 3600,
            "tick_s": 30,
            "domain": {
                "type": "cards",
                "delivery": "http",
                "fraud": {"card_testing": {"rate_per_1k_card_hours": 20}},
            },
        }
    )
    scenario = CardsScenario(cfg, StackConfig())
    sink = MemorySink()
    engine = Engine(scenario, cfg, sink, speed="max")
    wrapped = engine.sink
    assert isinstance(wrapped, HttpEventSink)
    assert wrapped.url == "http://127.0.0.1:8000/v1/transactions"
    wrapped._transport = httpx.MockTransport(handler)  # no server in a unit test
    summary = engine.run()
    assert summary.events == len(bodies) > 100 and summary.failed == 0
    assert summary.details["http"]["ok"] == summary.events
    assert sink.events.values == [] and len(sink.truth.values) == summary.truth
    pans = set(scenario.cards.pans or [])
    channels = set()
    for body in bodies:
        request = TransactionRequest.model_validate_json(body)
        assert request.card_number in pans
        channels.add(request.channel)
    assert channels == {"card_present", "online", "card_not_present"}
    truth_ids = {orjson.loads(t)["event_id"] for t in sink.truth.values}
    assert {orjson.loads(b)["transaction_id"] for b in bodies} <= truth_ids
    assert not [p for p in pans if p.encode() in b"".join(sink.truth.values)]


def test_the_endpoint_url_defaults_to_the_stacks_api_address() -> None:
    domain = CardsDomain()
    stack = StackConfig.model_validate({"api": {"host": "0.0.0.0", "port": 8123}})
    assert endpoint_url(domain, stack) == "http://127.0.0.1:8123/v1/transactions"
    stack = StackConfig.model_validate({"api": {"host": "api.internal", "port": 80}})
    assert endpoint_url(domain, stack) == "http://api.internal:80/v1/transactions"
    chosen = CardsDomain.model_validate({"endpoint": {"url": "https://fraud.example/tx"}})
    assert endpoint_url(chosen, stack) == "https://fraud.example/tx"


def test_a_shed_request_is_retried_after_retry_after_then_decided_by_stand_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import simulators.sinks.http as http_sink

    slept: list[float] = []
    monkeypatch.setattr(http_sink.time, "sleep", slept.append)
    calls: dict[str, int] = {}
    lock = threading.Lock()

    def handler(request: httpx.Request) -> httpx.Response:
        txid = orjson.loads(request.content)["transaction_id"]
        with lock:
            calls[txid] = calls.get(txid, 0) + 1
            n = calls[txid]
        if txid == "t0" and n == 1:  # shed once, then answered
            return httpx.Response(429, headers={"retry-after": "0.3"}, json={"detail": "x"})
        if txid in ("t1", "t2"):  # shed every time: stand-in
            return httpx.Response(429, headers={"retry-after": "30"}, json={"detail": "x"})
        return httpx.Response(200, json={"decision": "approve"})

    bodies = [
        orjson.dumps({"transaction_id": f"t{i}", "card_number": PAN, "amount": amount})
        for i, amount in enumerate([10.0, 20.0, 900.0])
    ]
    inner = MemorySink()
    sink = HttpEventSink(
        inner, URL, transport=httpx.MockTransport(handler), retries=2, concurrency=1
    )
    sink.open(TOPICS)
    sink.write(Records([b"k"] * 3, bodies, [0, 1, 2]), Records())
    report = sink.close()
    stats = report.details["http"]
    assert calls == {"t0": 2, "t1": 3, "t2": 3}
    assert stats["ok"] == 1 and stats["shed_retries"] == 5 and stats["retried"] == 5
    assert stats["stand_in"] == {"approve": 1, "decline": 1}  # 20.00 under the floor, 900 not
    assert stats["status"] == {"200": 1, "429": 2}
    assert 0.3 in slept and http_sink.MAX_RETRY_AFTER_S in slept  # Retry-After, capped
    outcomes = {orjson.loads(v)["transaction_id"]: orjson.loads(v) for v in sink.recorded.values}
    assert outcomes["t0"]["outcome"] == "ok" and outcomes["t0"]["attempts"] == 2
    assert outcomes["t1"]["outcome"] == "shed" and outcomes["t1"]["decision"] is None
    assert outcomes["t1"]["error"] == "HTTP 429; stand-in approve"
    assert outcomes["t2"]["error"] == "HTTP 429; stand-in decline"
