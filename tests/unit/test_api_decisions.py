"""Decisions with a fake clock, through the real app (TestClient, in-memory publisher)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from api.fraud.decision import RECORD_KEYS
from api.fraud.models import CardLastUse, Health, Stats, TransactionResponse
from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings, IdempotencySettings, Scoring, StateSettings
from api.fraud.verdict import response_body
from api.main import create_app
from detectors import TravelParams, geodesic_km

PAN = "4111111111111111"
OTHER_PAN = "5555555555554444"
SECRET = b"unit-test-secret-0123456789"
T0 = 1_767_225_600_000
MIN = 60_000
LONDON = (51.5074, -0.1278)
SYDNEY = (-33.8688, 151.2093)
NEW_YORK = (40.7128, -74.0060)


class FakeClock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def tx(txid: str, at_ms: int, where: tuple[float, float] | None = LONDON, **more: Any) -> dict:
    body: dict[str, Any] = {
        "transaction_id": txid,
        "card_number": PAN,
        "amount": 25.0,
        "currency": "GBP",
        "merchant_id": "m-1",
        "merchant_category": "grocery",
        "channel": "card_present" if where else "online",
        "country": "GB",
        "event_time": at_ms,
    }
    if where:
        body["lat"], body["lon"] = where
    body.update(more)
    return body


class Harness:
    def __init__(self, settings: ApiSettings | None = None, token: str | None = "ctl") -> None:
        self.clock = FakeClock()
        self.publisher = MemoryPublisher()
        self.service = FraudService(
            settings or ApiSettings(gc_freeze_interval_s=None),
            ApiSecrets(SECRET, token),
            publisher=self.publisher,
            clock=self.clock,
        )
        self.client = TestClient(create_app(self.service))

    def post(self, body: dict) -> dict:
        response = self.client.post("/v1/transactions", json=body)
        assert response.status_code == 200, response.text
        TransactionResponse.model_validate_json(response.content)
        return dict(response.json())

    def records(self) -> list[dict]:
        return [orjson.loads(value) for _, value in self.publisher.records]


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness()
    with harness.client:
        yield harness


def test_unknown_card_is_approved_with_no_history(h: Harness) -> None:
    verdict = h.post(tx("t1", T0))
    assert verdict["decision"] == "approve"
    assert verdict["reasons"] == ["no_history"]
    assert verdict["score"] == 0.0
    assert verdict["card_token"] == h.service.tokenizer.token(PAN)
    assert verdict["card_last4"] == "1111"
    assert verdict["evidence"]["previous_use"] is None
    assert verdict["evidence"]["travel"] is None
    assert verdict["evidence"]["velocity"]["tx_count"] == 1
    assert verdict["decided_at"] == h.clock.now


def test_impossible_travel_is_declined_with_evidence(h: Harness) -> None:
    h.post(tx("t1", T0, LONDON))
    verdict = h.post(tx("t2", T0 + 3 * MIN, SYDNEY, country="AU"))
    assert verdict["decision"] == "decline"
    assert verdict["reasons"] == ["impossible_travel"]
    assert verdict["score"] == pytest.approx(0.9)
    evidence = verdict["evidence"]
    assert evidence["previous_use"]["transaction_id"] == "t1"
    travel = evidence["travel"]
    assert travel["previous"] == {
        "transaction_id": "t1",
        "event_time": T0,
        "lat": LONDON[0],
        "lon": LONDON[1],
    }
    assert travel["distance_km"] == pytest.approx(geodesic_km(*LONDON, *SYDNEY))
    assert travel["gap_s"] == 180.0
    assert travel["speed_kmh"] == pytest.approx(travel["distance_km"] * 20)
    assert travel["impossible"] is True
    alerts = evidence["alerts"]
    assert [(a["rule"], a["event_ids"]) for a in alerts] == [("impossible_travel", ["t1", "t2"])]


def test_a_real_flight_is_approved_with_travel_evidence(h: Harness) -> None:
    h.post(tx("t1", T0, LONDON))
    verdict = h.post(tx("t2", T0 + 8 * 60 * MIN, NEW_YORK, country="US"))
    assert verdict["decision"] == "approve"
    assert verdict["reasons"] == []
    travel = verdict["evidence"]["travel"]
    assert travel["impossible"] is False
    assert 5500 < travel["distance_km"] < 5600
    assert travel["gap_s"] == 8 * 3600


def test_online_purchases_while_travelling_raise_no_travel_alert(h: Harness) -> None:
    h.post(tx("t1", T0, LONDON))
    online = h.post(tx("t2", T0 + 3 * MIN, None, country="AU", merchant_id="shop-au"))
    assert online["decision"] == "approve"
    assert online["reasons"] == []
    assert online["evidence"]["travel"] is None
    assert online["evidence"]["previous_use"]["transaction_id"] == "t1"
    # The online use is not a location: the next London use compares with London.
    back = h.post(tx("t3", T0 + 10 * MIN, LONDON))
    assert back["decision"] == "approve"
    assert back["evidence"]["travel"]["previous"]["transaction_id"] == "t1"
    assert back["evidence"]["previous_use"]["transaction_id"] == "t2"


def test_card_testing_velocity_goes_to_review(h: Harness) -> None:
    verdicts = [
        h.post(tx(f"t{i}", T0 + i * 10_000, None, amount=1.0, merchant_id=f"m{i}"))
        for i in range(3)
    ]
    assert [v["decision"] for v in verdicts] == ["approve"] * 2 + ["review"]
    last = verdicts[-1]
    assert last["reasons"] == ["velocity"]
    assert last["score"] == pytest.approx(0.6)
    velocity = last["evidence"]["velocity"]
    assert velocity["tx_count"] == 3
    assert velocity["small_count"] == 3
    assert velocity["window_s"] == 600.0
    assert last["evidence"]["alerts"][0]["label"] == "card_testing"
    assert verdicts[1]["evidence"]["velocity"]["tx_count"] == 2


def test_both_rules_together_decline(h: Harness) -> None:
    for i in range(4):
        h.post(tx(f"t{i}", T0 + i * 10_000, LONDON, amount=1.0))
    verdict = h.post(tx("t4", T0 + 50_000, SYDNEY, amount=1.0))
    assert verdict["decision"] == "decline"
    assert sorted(verdict["reasons"]) == ["impossible_travel", "velocity"]
    assert verdict["score"] == pytest.approx(1 - 0.1 * 0.4)


def test_a_declined_use_does_not_become_the_last_location(h: Harness) -> None:
    h.post(tx("t1", T0, LONDON))
    assert h.post(tx("t2", T0 + 3 * MIN, SYDNEY))["decision"] == "decline"
    verdict = h.post(tx("t3", T0 + 20 * MIN, LONDON))
    assert verdict["decision"] == "approve"
    assert verdict["evidence"]["travel"]["previous"]["transaction_id"] == "t1"
    assert verdict["evidence"]["previous_use"]["decision"] == "decline"


def test_travel_thresholds_come_from_settings() -> None:
    harness = Harness(ApiSettings(travel=TravelParams(min_distance_km=20_000)))
    with harness.client:
        harness.post(tx("t1", T0, LONDON))
        verdict = harness.post(tx("t2", T0 + 3 * MIN, SYDNEY))  # 17,000 km: below the minimum
    assert verdict["decision"] == "approve"
    assert verdict["evidence"]["travel"]["min_distance_km"] == 20_000


def test_scoring_comes_from_settings() -> None:
    harness = Harness(ApiSettings(scoring=Scoring(weights={"impossible_travel": 0.6})))
    with harness.client:
        harness.post(tx("t1", T0, LONDON))
        verdict = harness.post(tx("t2", T0 + 3 * MIN, SYDNEY))
    assert verdict["reasons"] == ["impossible_travel"]
    assert verdict["decision"] == "review"
    assert verdict["score"] == pytest.approx(0.6)


def test_declined_uses_can_be_made_anchors() -> None:
    harness = Harness(ApiSettings(state=StateSettings(anchor_declined=True)))
    with harness.client:
        harness.post(tx("t1", T0, LONDON))
        assert harness.post(tx("t2", T0 + 3 * MIN, SYDNEY))["decision"] == "decline"
        verdict = harness.post(tx("t3", T0 + 20 * MIN, LONDON))
    assert verdict["decision"] == "decline"
    assert verdict["evidence"]["travel"]["previous"]["transaction_id"] == "t2"


def test_a_repeat_gets_the_same_bytes_and_is_published_once(h: Harness) -> None:
    h.post(tx("t1", T0, LONDON))
    first = h.client.post("/v1/transactions", json=tx("t2", T0 + 3 * MIN, SYDNEY))
    h.clock.now += 5_000
    again = h.client.post("/v1/transactions", json=tx("t2", T0 + 3 * MIN, SYDNEY))
    changed = h.client.post("/v1/transactions", json=tx("t2", T0 + 3 * MIN, LONDON, amount=9.0))
    assert first.content == again.content == changed.content
    assert [r["transaction_id"] for r in h.records()] == ["t1", "t2"]
    stats = h.client.get("/v1/stats").json()
    assert stats["replays"] == 2
    assert stats["decisions"] == {"approve": 1, "review": 0, "decline": 1}
    assert stats["requests"] == 4
    # The repeats changed nothing: velocity still counts two transactions.
    assert h.post(tx("t3", T0 + 4 * MIN, None))["evidence"]["velocity"]["tx_count"] == 3


def test_verdicts_expire_after_the_ttl() -> None:
    harness = Harness(ApiSettings(idempotency=IdempotencySettings(ttl_s=60)))
    with harness.client:
        first = harness.post(tx("t1", T0))
        harness.clock.now += 61_000
        again = harness.post(tx("t1", T0))
    assert again["decided_at"] == first["decided_at"] + 61_000
    # The state did not apply t1 twice: the re-decision sees no other use.
    assert again["evidence"]["velocity"]["tx_count"] == 1


def test_the_record_holds_token_and_last4_and_no_pan(h: Harness) -> None:
    h.post(tx("t1", T0, LONDON, terminal_id="pos-9"))
    h.post(tx("t2", T0 + MIN, None))
    key, value = h.publisher.records[0]
    record = orjson.loads(value)
    assert key == record["card_token"] == h.service.tokenizer.token(PAN)
    assert record["card_last4"] == "1111"
    assert set(RECORD_KEYS) <= set(record)
    assert record["schema"] == "cards.activity/1"
    assert record["event_id"] == record["transaction_id"] == "t1"
    assert record["terminal_id"] == "pos-9"
    assert record["card_present"] is True
    assert orjson.loads(h.publisher.records[1][1])["card_present"] is False
    assert "card_number" not in record
    for key, value in h.publisher.records:
        assert PAN not in key and PAN.encode() not in value


def test_a_rebuilt_state_decides_exactly_as_before() -> None:
    """Replay one endpoint's records into a fresh one (as the updater does on start)."""
    from api.fraud.updater import ActivityUpdater
    from core.config import StackConfig

    before = Harness()
    with before.client:
        before.post(tx("t1", T0, LONDON))
        for i in range(3):
            before.post(tx(f"s{i}", T0 + (i + 1) * 10_000, None, amount=1.0))
        declined = before.client.post("/v1/transactions", json=tx("t2", T0 + MIN, SYDNEY))
        before.clock.now += 1_000
        reference = before.client.post("/v1/transactions", json=tx("t3", T0 + 2 * MIN, SYDNEY))

    after = Harness()
    updater = ActivityUpdater(StackConfig(), "cards.activity", after.service.state)
    for _, value in before.publisher.records[:-1]:  # all but t3
        updater._apply(value, 0, 0)
    assert updater.applied == 5 and updater.malformed == 0
    updater._apply(b"{not json", 0, 5)
    updater._apply(b'{"transaction_id": "x"}', 0, 6)
    assert updater.malformed == 2
    after.clock.now = before.clock.now
    with after.client:
        replay = after.client.post("/v1/transactions", json=tx("t2", T0 + MIN, SYDNEY))
        decided = after.client.post("/v1/transactions", json=tx("t3", T0 + 2 * MIN, SYDNEY))
    assert replay.content == declined.content  # the pre-restart verdict, byte for byte
    assert decided.content == reference.content  # same state: same decision
    assert orjson.loads(decided.content)["decision"] == "decline"  # velocity + travel
    assert [r["transaction_id"] for r in after.records()] == ["t3"]  # t2 not republished


def test_own_records_coming_back_from_the_topic_are_not_applied_twice(h: Harness) -> None:
    from api.fraud.updater import ActivityUpdater
    from core.config import StackConfig

    h.post(tx("t1", T0, None))
    updater = ActivityUpdater(StackConfig(), "cards.activity", h.service.state)
    for _, value in h.publisher.records:
        updater._apply(value, 0, 0)
    assert (updater.applied, updater.skipped) == (0, 1)
    assert h.post(tx("t2", T0 + MIN, None))["evidence"]["velocity"]["tx_count"] == 2


def test_own_records_are_skipped_by_their_header_before_parsing(h: Harness) -> None:
    from api.fraud.publisher import TXID_HEADER
    from api.fraud.updater import ActivityUpdater
    from core.config import StackConfig

    h.post(tx("t1", T0, None))
    updater = ActivityUpdater(StackConfig(), "cards.activity", h.service.state)
    assert h.publisher.headers == [[(TXID_HEADER, b"t1")]]
    assert updater._known(h.publisher.headers[0])
    assert (updater.applied, updater.skipped, updater.malformed) == (0, 1, 0)
    # Another instance's record (unknown id), or one without the header: parsed and applied.
    other = {**h.records()[0], "transaction_id": "o1", "event_id": "o1"}
    assert not updater._known([(TXID_HEADER, b"o1")])
    assert not updater._known(None) and not updater._known([("other", b"t1")])
    updater._apply(orjson.dumps(other), 0, 1)
    assert (updater.applied, updater.skipped, updater.malformed) == (1, 1, 0)
    assert updater._known([(TXID_HEADER, b"o1")])
    assert h.post(tx("t2", T0 + MIN, None))["evidence"]["velocity"]["tx_count"] == 3


def test_a_record_from_the_topic_gets_its_verdict_body_built_when_asked() -> None:
    """Another instance's record is cached as its bytes; a retry gets the deciding instance's
    body, byte for byte (built once, then kept)."""
    from api.fraud.updater import ActivityUpdater
    from core.config import StackConfig

    other = Harness()
    with other.client:
        answered = other.client.post("/v1/transactions", json=tx("o1", T0, LONDON))
    here = Harness()
    updater = ActivityUpdater(StackConfig(), "cards.activity", here.service.state)
    updater._apply(other.publisher.records[0][1], 0, 0)
    verdicts = here.service.state.verdicts
    assert verdicts.entries["o1"][1:] == (other.publisher.records[0][1], False)
    here.clock.now = other.clock.now
    with here.client:
        retried = here.client.post("/v1/transactions", json=tx("o1", T0, LONDON))
    assert retried.content == answered.content
    assert verdicts.entries["o1"][1:] == (answered.content, True)
    assert here.publisher.records == []  # a replay: not published again


def test_response_body_is_a_function_of_the_record(h: Harness) -> None:
    response = h.client.post("/v1/transactions", json=tx("t1", T0))
    assert response_body(h.records()[0]) == response.content


def test_last_use_by_token(h: Harness) -> None:
    token = h.service.tokenizer.token(PAN)
    assert h.client.get(f"/v1/cards/{token}/last-use").status_code == 404
    h.post(tx("t1", T0, LONDON))
    h.post(tx("t2", T0 + MIN, None, amount=3.0))
    response = h.client.get(f"/v1/cards/{token}/last-use")
    assert response.status_code == 200
    view = CardLastUse.model_validate_json(response.content)
    assert view.last_use.transaction_id == "t2"
    assert view.last_use.amount == 3.0
    assert view.last_located_use is not None
    assert view.last_located_use.transaction_id == "t1"
    assert view.recent_transactions == 2
    assert view.card_last4 == "1111"
    other = h.service.tokenizer.token(OTHER_PAN)
    assert h.client.get(f"/v1/cards/{other}/last-use").status_code == 404


def test_last_use_never_looks_up_or_echoes_a_pan(h: Harness) -> None:
    h.post(tx("t1", T0))
    response = h.client.get(f"/v1/cards/{PAN}/last-use")
    assert response.status_code == 404
    assert PAN not in response.text


def test_stats_count_decisions_and_latency(h: Harness) -> None:
    h.post(tx("t1", T0, LONDON))
    h.post(tx("t2", T0 + MIN, SYDNEY))
    h.client.post("/v1/transactions", json=tx("t3", T0, LONDON, amount=-1))
    stats = Stats.model_validate(h.client.get("/v1/stats").json())
    assert stats.requests == 3
    assert stats.decisions == {"approve": 1, "review": 0, "decline": 1}
    assert stats.rejected == 1
    assert stats.latency_ms.count == 3
    assert stats.latency_ms.p50 is not None and stats.latency_ms.p50 > 0
    assert stats.publish.sent == 2
    assert stats.state.cards == 1 and stats.state.verdicts == 2


def test_control_routes_need_the_bearer_token(h: Harness) -> None:
    h.post(tx("t1", T0))
    assert h.client.post("/v1/control/stats/reset").status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert h.client.post("/v1/control/stats/reset", headers=wrong).status_code == 401
    assert h.client.get("/v1/stats").json()["requests"] == 1
    right = {"Authorization": "Bearer ctl"}
    assert h.client.post("/v1/control/stats/reset", headers=right).status_code == 200
    assert h.client.get("/v1/stats").json()["requests"] == 0


def test_control_routes_are_disabled_without_a_token() -> None:
    harness = Harness(token=None)
    with harness.client:
        response = harness.client.post(
            "/v1/control/stats/reset", headers={"Authorization": "Bearer some-token"}
        )
        missing = harness.client.post("/v1/control/stats/reset")
        empty = harness.client.post("/v1/control/stats/reset", headers={"Authorization": "Bearer "})
    assert response.status_code == 403
    assert "STREAMSIM_API_TOKEN" in response.text
    # No token sent: 401 with the challenge, as when control is on.
    for r in (missing, empty):
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert "STREAMSIM_API_TOKEN" in r.text


def test_health_and_docs(h: Harness) -> None:
    health = Health.model_validate(h.client.get("/v1/health").json())
    assert health.status == "ok"
    assert health.state.status == "disabled"
    assert h.client.get("/health").status_code == 200
    assert h.client.get("/docs").status_code == 200
    spec = h.client.get("/openapi.json").json()
    assert "/v1/transactions" in spec["paths"]
    assert "/v1/cards/{token}/last-use" in spec["paths"]
    assert "TransactionRequest" in spec["components"]["schemas"]


def test_the_state_is_frozen_out_of_the_cyclic_gc_while_serving() -> None:
    import gc

    harness = Harness(ApiSettings(gc_freeze_interval_s=0.05))
    with harness.client:
        assert gc.get_freeze_count() > 0
        harness.post(tx("t1", T0))
        frozen = gc.get_freeze_count()
        deadline = time.monotonic() + 10  # a loaded machine may run the loop late
        while gc.get_freeze_count() <= frozen and time.monotonic() < deadline:
            time.sleep(0.1)
            harness.client.get("/v1/stats")  # lets the event loop run the periodic freeze
        assert gc.get_freeze_count() > frozen
    assert gc.get_freeze_count() == 0  # unfrozen on shutdown
