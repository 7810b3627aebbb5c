"""The Shipping page rendered by Streamlit's AppTest: against the real API app (a hand-fed
shipping tail, no Kafka) through an httpx transport, and with the API down or without Kafka:
what is down is said with the command that starts it, never a traceback."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient
from streamlit.testing.v1 import AppTest

from api.main import create_app
from core.config import StackConfig
from core.config.owner_tokens import OwnerTokens
from live.views.ships import ShipsView
from tests.conftest import free_port
from tests.unit.test_api_shipping import (
    BOX_A,
    BOX_B,
    CONTROL,
    TOKEN_A,
    TOKEN_B,
    A,
    B,
    HandFed,
    raw,
    reading,
    service,
)
from tests.unit.test_api_ships import SHIP, Feeds, voyage
from tests.unit.test_ui_pages import page_script
from ui.client import ApiClient
from ui.sections.shipping import unwrap


@pytest.fixture
def api() -> Iterator[ApiClient]:
    """The real app over a hand-fed tail, reached through an httpx transport."""
    tail = HandFed(StackConfig.model_validate({}), fleet=voyage())
    for box, owner in ((BOX_A, A), (BOX_B, B)):
        raw(tail.view, reading(box, owner, 0, 1_000))
    app = create_app(
        service(),
        owner_tokens=OwnerTokens({A: TOKEN_A, B: TOKEN_B}, control_token=CONTROL),
        shipping=tail,
    )
    feeds = Feeds()
    feeds.alerts.append(
        {"alert_id": "x1", "rule": "reefer_drift", "label": "reefer_failure", "job": "shipping",
         "entity_id": BOX_A, "event_time": 1_000, "detected_at": 2_000, "evidence": {"t": 9.5},
         "late": True, "late_by_ms": 36 * 3_600_000}
    )  # fmt: skip
    app.state.feeds = feeds
    with TestClient(app) as http:

        def forward(request: httpx.Request) -> httpx.Response:
            got = http.request(
                request.method, str(request.url.raw_path.decode()), headers=request.headers
            )
            return httpx.Response(got.status_code, content=got.content, headers=got.headers)

        yield ApiClient("http://api", transport=httpx.MockTransport(forward))


def render(client: ApiClient) -> AppTest:
    test = AppTest.from_function(page_script, args=("shipping", client), default_timeout=30)
    test.run()
    assert not test.exception, test.exception
    return test


def texts(test: AppTest) -> str:
    parts = [m.value for m in (*test.markdown, *test.caption, *test.error, *test.info)]
    return "\n".join(str(p) for p in parts)


def test_the_page_shows_the_fleet_backlog_alerts_and_an_owners_timeline(api: ApiClient) -> None:
    test = render(api)
    metrics = {m.label: m.value for m in test.metric}
    assert metrics["Ships"] == "1" and metrics["At sea"] == "1" and metrics["In port"] == "0"
    assert metrics["Onboard records landed"] == "20"
    shown = texts(test)
    assert "reefer_failure" in shown and "late by 36.0 h" in shown and BOX_A in shown
    (backlog, *_) = test.dataframe
    row = backlog.value.iloc[0]
    assert row["ship"] == SHIP and row["peak held"] == 20 and row["satellite alarms"] == 1
    assert "Type an owner token" in shown
    test.text_input(key="shipping-owner-token").input(TOKEN_A).run()
    shown = texts(test)
    assert f"Owner **{A}**" in shown and f"Timeline of `{BOX_A}`" in shown
    assert BOX_B not in shown.split("Container timeline")[-1]
    test.text_input(key="shipping-owner-token").input("not-an-owners-token-00").run()
    assert any("Not an owner token" in e.value for e in test.error)


def test_the_page_says_what_is_down() -> None:
    down = render(ApiClient(f"http://127.0.0.1:{free_port()}", timeout_s=2))
    errors = [e.value for e in down.error]
    assert errors and all("API down" in e and "streamsim api" in e for e in errors), errors
    with TestClient(create_app(service())) as http:  # an API without Kafka

        def forward(request: httpx.Request) -> httpx.Response:
            got = http.request(request.method, str(request.url.raw_path.decode()))
            return httpx.Response(got.status_code, content=got.content)

        no_kafka = render(ApiClient("http://api", transport=httpx.MockTransport(forward)))
    errors = [e.value for e in no_kafka.error]
    assert errors and all("streamsim kafka up" in e for e in errors), errors


def test_no_ship_yet_says_how_to_start_a_run() -> None:
    empty = HandFed(StackConfig.model_validate({}), fleet=ShipsView())
    with TestClient(create_app(service(), shipping=empty)) as http:

        def forward(request: httpx.Request) -> httpx.Response:
            got = http.request(request.method, str(request.url.raw_path.decode()))
            return httpx.Response(got.status_code, content=got.content)

        test = render(ApiClient("http://api", transport=httpx.MockTransport(forward)))
    assert any("streamsim simulate config/scenarios/shipping.yaml" in i.value for i in test.info)


def test_a_path_crossing_the_antimeridian_stays_whole() -> None:
    assert unwrap([[179.0, 0.0], [-179.0, 1.0], [-170.0, 2.0]]) == [
        [179.0, 0.0],
        [181.0, 1.0],
        [190.0, 2.0],
    ]
