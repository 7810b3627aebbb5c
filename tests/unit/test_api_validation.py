"""Request validation: 422 with field-level messages, and never a card number echoed back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from api.fraud.models import ValidationErrorBody
from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from api.main import create_app

PAN = "4111111111111111"
T0 = 1_767_225_600_000


def body(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "transaction_id": "tx-1",
        "card_number": PAN,
        "amount": 12.5,
        "currency": "GBP",
        "merchant_id": "m-1",
        "merchant_category": "5411",
        "channel": "card_present",
        "lat": 51.5074,
        "lon": -0.1278,
        "country": "GB",
        "event_time": T0,
        "terminal_id": "pos-1",
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not ...}


@pytest.fixture
def publisher() -> MemoryPublisher:
    return MemoryPublisher()


@pytest.fixture
def client(publisher: MemoryPublisher) -> Iterator[TestClient]:
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", None),
        publisher=publisher,
    )
    with TestClient(create_app(service)) as test_client:
        yield test_client


def errors_of(client: TestClient, payload: Any, **kwargs: Any) -> list[dict[str, Any]]:
    response = client.post("/v1/transactions", json=payload, **kwargs)
    assert response.status_code == 422, response.text
    assert PAN not in response.text
    ValidationErrorBody.model_validate(response.json())
    return list(response.json()["detail"])


def at(errors: list[dict[str, Any]], field: str) -> dict[str, Any]:
    matches = [e for e in errors if e["loc"] == ["body", field]]
    assert matches, f"no error for {field}: {errors}"
    return matches[0]


def test_valid_body_is_accepted(client: TestClient, publisher: MemoryPublisher) -> None:
    assert client.post("/v1/transactions", json=body()).status_code == 200
    assert len(publisher.records) == 1


def test_negative_and_zero_amounts_are_rejected(client: TestClient) -> None:
    error = at(errors_of(client, body(amount=-5)), "amount")
    assert error["type"] == "greater_than"
    assert error["msg"] == "Input should be greater than 0"
    assert error["input"] == -5
    assert at(errors_of(client, body(amount=0)), "amount")["type"] == "greater_than"


def test_impossible_coordinates_are_rejected(client: TestClient) -> None:
    error = at(errors_of(client, body(lat=91)), "lat")
    assert error["type"] == "less_than_equal"
    assert "less than or equal to 90" in error["msg"]
    assert at(errors_of(client, body(lon=-180.5)), "lon")["type"] == "greater_than_equal"


def test_card_present_needs_a_location(client: TestClient) -> None:
    errors = errors_of(client, body(lat=..., lon=...))
    assert at(errors, "lat")["msg"] == "Value error, lat is required when channel is card_present"
    assert at(errors, "lon")["msg"] == "Value error, lon is required when channel is card_present"


@pytest.mark.parametrize("channel", ["online", "card_not_present"])
def test_online_must_not_have_a_location(client: TestClient, channel: str) -> None:
    error = at(errors_of(client, body(channel=channel)), "lat")
    assert f"must be absent when channel is {channel}" in error["msg"]
    ok = client.post("/v1/transactions", json=body(channel=channel, lat=..., lon=...))
    assert ok.status_code == 200


@pytest.mark.parametrize(
    ("pan", "kind"),
    [
        ("4111111111111112", "value_error"),  # Luhn
        ("41111111111", "string_too_short"),
        ("41111111111111111111", "string_too_long"),
        ("4111-1111-1111-1111", "string_pattern_mismatch"),
    ],
)
def test_bad_pan_is_rejected_and_redacted(client: TestClient, pan: str, kind: str) -> None:
    error = at(errors_of(client, body(card_number=pan)), "card_number")
    assert error["type"] == kind
    assert error["input"] == "[redacted]"


def test_pan_as_a_number_is_rejected_and_redacted(client: TestClient) -> None:
    error = at(errors_of(client, body(card_number=int(PAN))), "card_number")
    assert error["type"] == "string_type"
    assert error["input"] == "[redacted]"


def test_pan_is_not_echoed_by_whole_body_errors(client: TestClient) -> None:
    # A body that is not an object: the error's input is the whole body.
    errors = errors_of(client, [body()])
    assert errors[0]["loc"] == ["body"]
    # Unknown field holding a PAN, and a PAN copied into another field.
    errors = errors_of(client, body(pan=PAN, transaction_id=f"tx-{PAN}"))
    assert at(errors, "pan")["type"] == "extra_forbidden"
    assert "must not contain the card number" in at(errors, "transaction_id")["msg"]
    # Invalid JSON around a PAN.
    response = client.post(
        "/v1/transactions",
        content=b'{"card_number": "' + PAN.encode() + b'", ',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422
    assert PAN not in response.text
    # Not JSON at all.
    response = client.post(
        "/v1/transactions", content=f"card_number={PAN}", headers={"content-type": "text/plain"}
    )
    assert response.status_code == 422
    assert PAN not in response.text


@pytest.mark.parametrize("event_time", [-1, 4_102_444_800_001, 10**17])
def test_event_time_is_bounded(client: TestClient, event_time: int) -> None:
    assert at(errors_of(client, body(event_time=event_time)), "event_time")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("currency", "eur"),
        ("country", "GBR"),
        ("channel", "mail_order"),
        ("merchant_category", "!!"),
        ("transaction_id", ""),
        ("merchant_id", ...),
    ],
)
def test_other_fields_are_checked_by_name(client: TestClient, field: str, value: Any) -> None:
    error = at(errors_of(client, body(**{field: value})), field)
    assert error["msg"]
    assert error["type"]


def test_several_errors_are_reported_at_once(client: TestClient) -> None:
    errors = errors_of(client, body(amount=-1, lat=91, card_number="1234567890123"))
    assert {tuple(e["loc"]) for e in errors} >= {
        ("body", "amount"),
        ("body", "lat"),
        ("body", "card_number"),
    }


def test_rejected_requests_are_counted_and_not_published(
    client: TestClient, publisher: MemoryPublisher
) -> None:
    errors_of(client, body(amount=-1))
    errors_of(client, body(lat=91))
    stats = client.get("/v1/stats").json()
    assert stats["rejected"] == 2
    assert stats["requests"] == 2
    assert publisher.records == []


def test_error_body_is_json_with_detail_list(client: TestClient) -> None:
    response = client.post("/v1/transactions", json=body(amount=-1))
    assert response.headers["content-type"] == "application/json"
    assert isinstance(orjson.loads(response.content)["detail"], list)


def test_the_request_model_never_shows_the_pan() -> None:
    from api.fraud.models import TransactionRequest

    request = TransactionRequest.model_validate(body())
    assert PAN not in repr(request)
    assert PAN not in str(request)
