"""The control panel's API client against a mock transport: the token only on control routes,
errors the pages can show as they are."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import free_port
from ui.client import ApiClient, ApiError, ApiUnavailable, default_url, describe


def recorder(
    responses: dict[tuple[str, str], httpx.Response],
) -> tuple[list[httpx.Request], httpx.MockTransport]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return responses.get(
            (request.method, request.url.path), httpx.Response(404, json={"detail": "no route"})
        )

    return seen, httpx.MockTransport(handle)


def test_the_token_goes_to_control_routes_and_the_run_list_only() -> None:
    run = {"run_id": "r1", "status": "running", "pid": 7}
    seen, transport = recorder(
        {
            ("POST", "/v1/control/runs"): httpx.Response(201, json=run),
            ("DELETE", "/v1/control/runs/r1"): httpx.Response(
                200, json={**run, "status": "stopped"}
            ),
            ("GET", "/v1/runs"): httpx.Response(200, json={"runs": [run]}),
            ("POST", "/v1/transactions"): httpx.Response(200, json={"decision": "approve"}),
        }
    )
    client = ApiClient("http://api", token="sekret", transport=transport)
    assert client.can_control
    assert client.start_run("sensors", speed=2.0, overrides={"entities": 5}) == run
    assert client.stop_run("r1")["status"] == "stopped"
    assert client.runs() == [run]
    assert client.decide({"transaction_id": "t1"}) == {"decision": "approve"}
    auth = [(r.method, r.url.path, r.headers.get("authorization")) for r in seen]
    assert auth == [
        ("POST", "/v1/control/runs", "Bearer sekret"),
        ("DELETE", "/v1/control/runs/r1", "Bearer sekret"),
        ("GET", "/v1/runs", "Bearer sekret"),  # stderr tails and overrides need it
        ("POST", "/v1/transactions", None),
    ]
    body = json.loads(seen[0].content)
    assert body == {"scenario": "sensors", "overrides": {"entities": 5}, "speed": 2.0}


def test_token_and_url_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMSIM_API_URL", "http://somewhere:9000/")
    monkeypatch.setenv("STREAMSIM_API_TOKEN", "from-env")
    client = ApiClient()
    assert client.base_url == "http://somewhere:9000" and client.token == "from-env"
    monkeypatch.delenv("STREAMSIM_API_TOKEN")
    assert not ApiClient().can_control
    monkeypatch.delenv("STREAMSIM_API_URL")
    monkeypatch.setenv("STREAMSIM_API_PORT", "8123")
    assert default_url().endswith(":8123")


def test_errors_are_readable() -> None:
    detail = [
        {
            "loc": ["body", "overrides", "delivery", "drops", "probability"],
            "msg": "key 'delivery.drops.probability' has bad value 2: must be <= 1",
            "type": "less_than_equal",
        },
        {"loc": ["body", "speed"], "msg": "Input should be greater than 0", "type": "x"},
    ]
    _, transport = recorder(
        {
            ("POST", "/v1/control/runs"): httpx.Response(422, json={"detail": detail}),
            ("DELETE", "/v1/control/runs/r1"): httpx.Response(401, json={"detail": "wrong"}),
            ("GET", "/v1/evaluations/latest"): httpx.Response(404, json={"detail": "none"}),
            ("GET", "/v1/alerts"): httpx.Response(503, text="down for maintenance"),
        }
    )
    client = ApiClient("http://api", token="t", transport=transport)
    with pytest.raises(ApiError) as info:
        client.start_run("sensors")
    assert info.value.status == 422
    assert str(info.value) == (
        "key 'delivery.drops.probability' has bad value 2: must be <= 1; "
        "speed: Input should be greater than 0"
    )
    with pytest.raises(ApiError, match="STREAMSIM_API_TOKEN"):
        client.stop_run("r1")
    assert client.latest_evaluation() is None  # 404 means: none yet
    with pytest.raises(ApiError, match="down for maintenance"):
        client.alerts()
    assert describe(409, {"message": "already running", "run_id": "r"}) == "already running"


def test_a_down_api_says_where_and_how_to_start_it() -> None:
    client = ApiClient(f"http://127.0.0.1:{free_port()}", timeout_s=2)
    with pytest.raises(ApiUnavailable) as info:
        client.health()
    assert info.value.reason == "connection refused"
    assert "streamsim api" in str(info.value) and client.base_url in str(info.value)
