"""Load-test bodies: valid ones validate as TransactionRequest, invalid ones get 422, the fraud
mix is what it says, and the same seed gives the same bodies."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from api.fraud.models import TransactionRequest
from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from api.main import create_app
from core.geo import haversine_km
from core.pan import luhn_check_digits, luhn_valid, make_pans
from streamsim.loadtest.config import PayloadMix
from streamsim.loadtest.payloads import (
    CARD_TESTING,
    FAR_KM,
    IMPOSSIBLE_TRAVEL,
    INVALID,
    KINDS,
    PayloadSet,
    build_payloads,
)

MIX = PayloadMix(
    cards=2_000,
    cities=200,
    merchants=500,
    unknown_card_share=0.05,
    impossible_travel_share=0.04,
    card_testing_share=0.06,
    invalid_share=0.05,
)
TIMES = np.arange(4_000) / 200.0  # 200/s for 20 s
BASE_MS = 1_767_225_600_000


@pytest.fixture(scope="module")
def payloads() -> PayloadSet:
    return build_payloads(MIX, TIMES, seed=11)


@pytest.fixture(scope="module")
def bodies(payloads: PayloadSet) -> list[dict]:
    return [orjson.loads(b) for b in payloads.bodies(TIMES, "t1", BASE_MS)]


def test_luhn_digits_and_pans() -> None:
    digits = np.array([[int(c) for c in "411111111111111"], [int(c) for c in "555555555555444"]])
    assert luhn_check_digits(digits).tolist() == [1, 4]
    pans = make_pans(np.random.default_rng(1), 5_000, ("4", "51", "55"), dtype=np.int64)
    assert len(set(pans)) == 5_000
    assert all(len(p) == 16 and luhn_valid(p) and p[0] in "45" for p in pans)


def test_valid_bodies_validate_and_invalid_ones_do_not(
    payloads: PayloadSet, bodies: list[dict]
) -> None:
    raw = payloads.bodies(TIMES, "t1", BASE_MS)
    for body, kind in zip(raw, payloads.kinds.tolist(), strict=True):
        if kind == INVALID:
            with pytest.raises(ValidationError):
                TransactionRequest.model_validate_json(body)
        else:
            tx = TransactionRequest.model_validate_json(body)
            assert tx.card_present == (tx.lat is not None)
    ids = [b["transaction_id"] for b in bodies]
    assert len(set(ids)) == len(ids) and ids[0] == "lt-t1-0"
    event_ms = [b["event_time"] for b in bodies]
    assert event_ms[0] == BASE_MS and event_ms[-1] == BASE_MS + round(TIMES[-1] * 1000)


def test_the_endpoint_answers_invalid_bodies_with_422(payloads: PayloadSet) -> None:
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", None),
        publisher=MemoryPublisher(),
    )
    raw = payloads.bodies(TIMES, "t2", BASE_MS)
    kinds = payloads.kinds.tolist()
    invalid = [i for i, k in enumerate(kinds) if k == INVALID][:40]
    valid = [i for i, k in enumerate(kinds) if k != INVALID][:40]
    headers = {"content-type": "application/json"}
    client: Iterator[TestClient]
    with TestClient(create_app(service)) as client:
        for i in invalid:
            response = client.post("/v1/transactions", content=raw[i], headers=headers)
            assert response.status_code == 422, raw[i]
            assert response.json()["detail"][0]["loc"][0] == "body"
        for i in valid:
            assert (
                client.post("/v1/transactions", content=raw[i], headers=headers).status_code == 200
            )


def test_mix_shares(payloads: PayloadSet) -> None:
    counts = payloads.counts()
    n = len(TIMES)
    assert set(counts) == set(KINDS) and sum(counts.values()) == n
    assert counts["invalid"] == round(n * MIX.invalid_share)
    assert counts["unknown_card"] == round(n * MIX.unknown_card_share)
    assert counts["impossible_travel"] == pytest.approx(n * MIX.impossible_travel_share, abs=4)
    assert counts["card_testing"] == pytest.approx(
        n * MIX.card_testing_share, abs=MIX.card_testing_burst
    )
    ordinary = counts["card_present"] + counts["online"]
    assert counts["online"] / ordinary == pytest.approx(MIX.online_share, abs=0.04)


def test_impossible_travel_pairs_and_card_testing_bursts(
    payloads: PayloadSet, bodies: list[dict]
) -> None:
    kinds = payloads.kinds
    by_card: dict[str, list[int]] = {}
    for i in np.flatnonzero(kinds == IMPOSSIBLE_TRAVEL).tolist():
        by_card.setdefault(bodies[i]["card_number"], []).append(i)
    pairs = [v for v in by_card.values() if len(v) == 2]
    assert len(pairs) >= len(by_card) - 2  # a card may (rarely) be drawn for two pairs
    for first, second in pairs:
        a, b = bodies[first], bodies[second]
        assert a["channel"] == b["channel"] == "card_present"
        assert 0 < b["event_time"] - a["event_time"] <= 31_000
        assert haversine_km(a["lat"], a["lon"], b["lat"], b["lon"]) > FAR_KM - 50
    bursts: dict[str, list[int]] = {}
    for i in np.flatnonzero(kinds == CARD_TESTING).tolist():
        bursts.setdefault(bodies[i]["card_number"], []).append(i)
    for slots in bursts.values():
        assert len(slots) % MIX.card_testing_burst == 0
        assert all(bodies[i]["channel"] == "online" and bodies[i]["amount"] < 5 for i in slots)
        merchants = [bodies[i]["merchant_id"] for i in slots[: MIX.card_testing_burst]]
        assert len(set(merchants)) == len(merchants)


def test_same_seed_same_bodies() -> None:
    times = TIMES[:1000]
    one = build_payloads(MIX, times, seed=5)
    two = build_payloads(MIX, times, seed=5)
    other = build_payloads(MIX, times, seed=6)
    assert one.middles == two.middles and np.array_equal(one.kinds, two.kinds)
    assert one.bodies(times, "x", 0) == two.bodies(times, "x", 0)
    assert one.middles != other.middles
