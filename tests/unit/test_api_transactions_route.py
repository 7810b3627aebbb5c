"""The transactions route's shortcuts for valid JSON bodies (the route's handler and the lane
in front of the routers) answer exactly as FastAPI's own handler would: same status, same
headers, same bytes, for valid and invalid bodies alike."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient

import api.fraud.routes.transactions as route
from api.fraud.models import TransactionRequest
from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from api.fraud.stats import LatencyMiddleware
from api.main import create_app

PATH = "/v1/transactions"
PAN = "4111111111111111"
T0 = 1_767_225_600_000
SECRET = b"unit-test-secret-0123456789"


def valid(i: int, rng: random.Random) -> dict[str, Any]:
    present = rng.random() < 0.6
    body: dict[str, Any] = {
        "transaction_id": f"tx-{i}",
        "card_number": rng.choice([PAN, "5555555555554444", "4012888888881881"]),
        "amount": round(rng.uniform(0.01, 500), rng.choice([0, 1, 2, 6])),
        "currency": "GBP",
        "merchant_id": f"m-{rng.randrange(5)}",
        "merchant_category": rng.choice(["5411", "grocery"]),
        "channel": "card_present" if present else rng.choice(["online", "card_not_present"]),
        "country": "GB",
        "event_time": T0 + i * rng.choice([1_000, 60_000]),
    }
    if present:
        body["lat"] = rng.choice([51.5074, -33.8688, 40.7128, rng.uniform(-90, 90)])
        body["lon"] = rng.choice([-0.1278, 151.2093, -74.006, rng.uniform(-180, 180)])
    if rng.random() < 0.3:
        body["terminal_id"] = f"pos-{rng.randrange(9)}"
    return body


#: Raw JSON values that coerce differently (or not at all) in lax Python and JSON modes.
ODD_VALUES = [
    "true",
    "false",
    "null",
    "0",
    "-0.0",
    "1.0",
    "1.5",
    "1e3",
    "1E400",
    "NaN",
    "Infinity",
    '"12.5"',
    '" 12 "',
    '"1_000"',
    '"1e2"',
    '"inf"',
    '"17.0"',
    "17672256000000000000000000",
    "8.150000000000000001",
    "0.30000000000000004441",
    '"4111111111111111"',
    '"\\u0034111111111111111"',
    '"tx-\\u00e9"',
    '"GB"',
    '"gb"',
    "[]",
    "{}",
    '""',
]


def mutate(body: dict[str, Any], rng: random.Random) -> bytes:
    """A valid body made odd: a field's value swapped for an odd raw value, a field dropped
    or added, a duplicate key, or bytes around the object."""
    raw = orjson.dumps(body)
    kind = rng.randrange(6)
    if kind == 0:
        key = rng.choice([*body, "lat", "terminal_id"])
        fields = [orjson.dumps(k) + b":" + orjson.dumps(v) for k, v in body.items() if k != key]
        fields.append(orjson.dumps(key) + b":" + rng.choice(ODD_VALUES).encode())
        return b"{" + b",".join(fields) + b"}"
    if kind == 1:
        key = rng.choice(list(body))
        return orjson.dumps({k: v for k, v in body.items() if k != key})
    if kind == 2:
        return orjson.dumps({**body, rng.choice(["pan", "extra", "cvv"]): "x"})
    if kind == 3:
        key = rng.choice(list(body))
        dup = orjson.dumps(key) + b":" + rng.choice(ODD_VALUES).encode()
        return b"{" + dup + b"," + raw[1:] if rng.random() < 0.5 else raw[:-1] + b"," + dup + b"}"
    if kind == 4:
        return (
            rng.choice([b" ", b"\n", b"\xef\xbb\xbf", b""])
            + raw
            + rng.choice([b" ", b"\r\n", b" x", b",", b""])
        )
    return raw.replace(b":", b" : ", rng.randrange(1, 4))


def corpus(seed: int = 7, count: int = 600) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        body = valid(i, rng)
        out.append(orjson.dumps(body) if rng.random() < 0.4 else mutate(body, rng))
    # A repeat of an earlier transaction id: the stored verdict, both ways.
    out.extend(out[:20])
    return out


class FixedClock:
    def __call__(self) -> int:
        return T0 + 5_000


Answer = tuple[int, list[tuple[bytes, bytes]], bytes]


def service() -> FraudService:
    return FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(SECRET, None),
        publisher=MemoryPublisher(),
        clock=FixedClock(),
    )


def lane_of(app: FastAPI) -> route.TransactionLane:
    layer: Any = app.middleware_stack
    while not isinstance(layer, route.TransactionLane):
        layer = layer.app
    return layer


def answers(
    bodies: list[bytes], content_type: str = "application/json", subject: FraudService | None = None
) -> tuple[list[Answer], int]:
    """Status, headers and body of each answer, and how many the lane served."""
    app = create_app(subject or service())
    # A 500 is an answer too (an integer beyond 64 bits in a 422's input is one, either way).
    with TestClient(app, raise_server_exceptions=False) as client:
        out = [
            (r.status_code, r.headers.raw, r.content)
            for r in (
                client.post(PATH, content=body, headers={"content-type": content_type})
                for body in bodies
            )
        ]
        return out, lane_of(app).served


def validates(body: bytes) -> bool:
    try:
        TransactionRequest.model_validate_json(body)
    except ValueError:
        return False
    return True


def counting(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Records every body the shortcut validates."""
    seen: list[bytes] = []
    original: Callable[..., TransactionRequest] = TransactionRequest.model_validate_json

    def spy(data: bytes) -> TransactionRequest:
        seen.append(data)
        return original(data)

    monkeypatch.setattr(TransactionRequest, "model_validate_json", spy)
    return seen


def test_shortcuts_answer_as_fastapi_does(monkeypatch: pytest.MonkeyPatch) -> None:
    bodies = corpus()
    seen = counting(monkeypatch)
    fast, served = answers(bodies)
    assert len(seen) >= len(bodies)  # every body was tried on a shortcut
    tried = len(seen)
    with monkeypatch.context() as m:
        m.setattr(route, "plain_json", lambda headers: False)
        standard, none = answers(bodies)
    assert len(seen) == tried and none == 0  # ... and none of these
    statuses = [status for status, _, _ in fast]
    assert {200, 422} <= set(statuses), statuses  # the corpus has both
    # The first request opens the lane (through the route); it serves every body after it that
    # validates from the raw bytes (a BOM-prefixed one does not: FastAPI's json.loads takes it).
    assert served == sum(map(validates, bodies[1:])) > len(bodies) // 3
    assert served < statuses[1:].count(200)
    for body, got, want in zip(bodies, fast, standard, strict=True):
        assert got == want, body


def test_other_content_types_take_fastapi_s_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    bodies = corpus(count=40)
    seen = counting(monkeypatch)
    charset, served = answers(bodies, "application/json; charset=utf-8")
    assert seen == [] and served == 0
    assert charset == answers(bodies)[0]
    text, _ = answers(bodies[:3], "text/plain")
    assert [status for status, _, _ in text] == [422] * 3


@pytest.mark.parametrize("where", ["app", "router"])
def test_dependencies_take_fastapi_s_handler(monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    calls: list[int] = []

    def dependency() -> None:
        calls.append(1)

    seen = counting(monkeypatch)
    app = FastAPI(dependencies=[Depends(dependency)] if where == "app" else [])
    app.include_router(
        route.router, dependencies=[Depends(dependency)] if where == "router" else []
    )
    app.state.service = service()
    app.add_middleware(route.TransactionLane, service=app.state.service)
    rng = random.Random(1)
    with TestClient(app) as client:
        for i in range(3):
            assert client.post(PATH, json=valid(i, rng)).status_code == 200
    assert calls == [1, 1, 1]
    assert seen == []
    assert lane_of(app).open is False and lane_of(app).served == 0


def test_errors_in_the_lane_are_the_route_s_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(self: FraudService, tx: TransactionRequest) -> bytes:
        raise RuntimeError("boom")

    bodies = [orjson.dumps(valid(i, random.Random(i))) for i in range(3)]
    subject = service()
    with monkeypatch.context() as m:
        m.setattr(FraudService, "answer", broken)
        got, served = answers(bodies, subject=subject)
        m.setattr(route, "plain_json", lambda headers: False)
        want, _ = answers(bodies)
    assert served == 2  # the first one opened the lane
    assert got == want and {status for status, _, _ in got} == {500}
    assert (subject.stats.requests, subject.stats.errors) == (3, 3)


async def _lane_with(
    messages: list[dict[str, Any]], open_lane: bool = True
) -> tuple[route.TransactionLane, list[dict[str, Any]], list[dict[str, Any]]]:
    """The lane in front of a stub app; returns it, what the stub received, what was sent."""
    received: list[dict[str, Any]] = []
    sent: list[dict[str, Any]] = []
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        return queue.pop(0) if queue else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            received.append(message)
            if message["type"] != "http.request" or not message.get("more_body"):
                return

    lane = route.TransactionLane(app, service())
    lane.open = open_lane
    scope = {
        "type": "http",
        "method": "POST",
        "path": PATH,
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
    }
    await lane(scope, receive, send)
    return lane, received, sent


def test_lane_reads_a_chunked_body_and_hands_over_interrupted_ones() -> None:
    import asyncio

    body = orjson.dumps(valid(1, random.Random(1)))
    chunks = [
        {"type": "http.request", "body": body[:50], "more_body": True},
        {"type": "http.request", "body": body[50:], "more_body": False},
    ]
    lane, received, sent = asyncio.run(_lane_with(chunks))
    assert lane.served == 1 and received == []
    assert sent[0]["status"] == 200 and orjson.loads(sent[1]["body"])["transaction_id"] == "tx-1"
    # A disconnect half-way, an invalid body, a closed lane: the app gets every message.
    cut = [chunks[0], {"type": "http.disconnect"}]
    lane, received, sent = asyncio.run(_lane_with(cut))
    assert (lane.served, received, sent) == (0, cut, [])
    bad = [{"type": "http.request", "body": body[:-1], "more_body": False}]
    lane, received, sent = asyncio.run(_lane_with(bad))
    assert (lane.served, received, sent) == (0, bad, [])
    lane, received, sent = asyncio.run(_lane_with(chunks, open_lane=False))
    assert (lane.served, received, sent) == (0, chunks, [])


def test_lane_sits_inside_the_latency_middleware() -> None:
    app = create_app(service())
    with TestClient(app) as client:
        client.get("/v1/health")
    layer: Any = app.middleware_stack
    order = []
    while hasattr(layer, "app"):
        order.append(type(layer))
        layer = layer.app
    assert order.index(LatencyMiddleware) < order.index(route.TransactionLane)
