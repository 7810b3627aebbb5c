"""The transactions route's shortcut for valid JSON bodies answers exactly as FastAPI's own
handler would: same status, same bytes, for valid and invalid bodies alike."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient

import api.routes.transactions as route
from api.main import create_app
from api.models import TransactionRequest
from api.publisher import MemoryPublisher
from api.service import FraudService
from api.settings import ApiSecrets, ApiSettings

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


def answers(bodies: list[bytes], content_type: str = "application/json") -> list[tuple[int, bytes]]:
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(SECRET, None),
        publisher=MemoryPublisher(),
        clock=FixedClock(),
    )
    # A 500 is an answer too (an integer beyond 64 bits in a 422's input is one, either way).
    with TestClient(create_app(service), raise_server_exceptions=False) as client:
        return [
            (r.status_code, r.content)
            for r in (
                client.post(
                    "/v1/transactions", content=body, headers={"content-type": content_type}
                )
                for body in bodies
            )
        ]


def counting(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Records every body the shortcut validates."""
    seen: list[bytes] = []
    original: Callable[..., TransactionRequest] = TransactionRequest.model_validate_json

    def spy(data: bytes) -> TransactionRequest:
        seen.append(data)
        return original(data)

    monkeypatch.setattr(TransactionRequest, "model_validate_json", spy)
    return seen


def test_shortcut_answers_as_fastapi_does(monkeypatch: pytest.MonkeyPatch) -> None:
    bodies = corpus()
    seen = counting(monkeypatch)
    fast = answers(bodies)
    assert len(seen) == len(bodies)  # every body was tried on the shortcut
    with monkeypatch.context() as m:
        m.setattr(route, "plain_json", lambda headers: False)
        standard = answers(bodies)
    assert len(seen) == len(bodies)  # ... and none of these
    statuses = {status for status, _ in fast}
    assert {200, 422} <= statuses, statuses  # the corpus has both
    assert sum(status == 200 for status, _ in fast) > len(bodies) // 3
    for body, got, want in zip(bodies, fast, standard, strict=True):
        assert got == want, body


def test_other_content_types_take_fastapi_s_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    bodies = corpus(count=40)
    seen = counting(monkeypatch)
    charset = answers(bodies, "application/json; charset=utf-8")
    assert seen == []
    assert charset == answers(bodies)
    text = answers(bodies[:3], "text/plain")
    assert [status for status, _ in text] == [422] * 3


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
    app.state.service = FraudService(
        ApiSettings(gc_freeze_interval_s=None), ApiSecrets(SECRET, None)
    )
    with TestClient(app) as client:
        response = client.post("/v1/transactions", json=valid(1, random.Random(1)))
    assert response.status_code == 200
    assert calls == [1]
    assert seen == []
