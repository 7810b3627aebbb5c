"""Each page rendered by Streamlit's AppTest against a canned API (httpx mock transport), and
against an API that is down; plus the pages' pure helpers."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import yaml
from streamlit.testing.v1 import AppTest

from runs.tunable import TunableKeys
from scenarios.catalog import ScenarioConfig
from tests.conftest import REPO_ROOT, free_port
from ui.client import ApiClient
from ui.sections import alerts, evaluation, map, try_it

PAN = "4000056655665556"
NOW = 1_795_000_000_000
DECLINE = {
    "transaction_id": "t2",
    "card_token": "tok_" + "a" * 32,
    "card_last4": "4444",
    "event_time": NOW,
    "decided_at": NOW + 3,
    "amount": 900.0,
    "currency": "AUD",
    "merchant_id": "m2",
    "channel": "card_present",
    "country": "AU",
    "lat": -33.87,
    "lon": 151.21,
    "decision": "decline",
    "score": 0.9,
    "reasons": ["impossible_travel"],
    "evidence": {
        "travel": {
            "previous": {
                "transaction_id": "t1",
                "event_time": NOW - 600_000,
                "lat": 51.5,
                "lon": 0,
            },
            "distance_km": 16988.8,
            "speed_kmh": 101932.6,
            "impossible": True,
        },
        "velocity": {"tx_count": 1, "min_count": 5},
    },
}
APPROVE = {**DECLINE, "transaction_id": "t1", "decision": "approve", "score": 0.0, "lat": 51.5,
           "lon": 0.0, "country": "GB", "reasons": ["no_history"], "evidence": {}}  # fmt: skip
SOURCE = {"topic": "x", "status": "live", "partitions": 3, "error": None}


def sensors() -> dict[str, Any]:
    data = yaml.safe_load((REPO_ROOT / "config/scenarios/sensors.yaml").read_text())
    return ScenarioConfig.model_validate(data).model_dump(mode="json")


def canned(requests: list[httpx.Request]) -> Callable[[httpx.Request], httpx.Response]:
    routes: dict[tuple[str, str], Any] = {
        ("GET", "/v1/health"): {"status": "ok", "kafka": {"connected": True}, "state": {}},
        ("GET", "/v1/scenarios"): {
            "scenarios": [
                {
                    "name": "sensors",
                    "file": "s.yaml",
                    "config": sensors(),
                    "error": None,
                    "tunable": TunableKeys.of(sensors()).dotted(),
                }
            ]
        },
        ("GET", "/v1/runs"): {"runs": []},
        ("POST", "/v1/control/runs"): {"run_id": "sensors-1", "pid": 42, "status": "running"},
        ("GET", "/v1/activity/recent"): {
            "activity": [DECLINE, APPROVE],
            "count": 2,
            "source": SOURCE,
        },
        ("GET", "/v1/alerts"): {
            "alerts": [
                {
                    "alert_id": "a1",
                    "rule": "velocity",
                    "label": "card_testing",
                    "entity_id": "tok_b",
                    "event_time": NOW,
                    "event_ids": ["e1", "e2"],
                    "evidence": {"tx_count": 9, "min_count": 5},
                    "source": "pipeline",
                    "job": "cards",
                    "detected_at": NOW + 5,
                }
            ],
            "count": 1,
            "source": SOURCE,
        },
        ("GET", "/v1/rates"): {
            "sampled_at": NOW,
            "interval_s": 1.0,
            "topics": [{"topic": "sensors.readings", "records_per_s": 2718.0, "end_offset": 9000}],
            "history": [{"at": NOW, "rates": {"sensors.readings": 2718.0}}],
            "error": None,
        },
        ("GET", "/v1/pipeline"): {"queries": [], "source": SOURCE},
        ("GET", "/v1/stats"): {
            "requests": 3,
            "decisions": {"approve": 2, "review": 0, "decline": 1},
            "latency_ms": {"p50": 1.5, "p99": 2.5},
            "publish": {"delivered": 3, "failed": 0, "queued": 0},
            "state": {"status": "live", "cards": 2},
            "uptime_s": 10.0,
        },
        ("GET", "/v1/evaluations/latest"): None,
        ("POST", "/v1/transactions"): {**DECLINE, "card_last4": PAN[-4:]},
    }

    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        body = routes.get((request.method, request.url.path))
        if body is None:
            return httpx.Response(404, json={"detail": "not here"})
        return httpx.Response(200, json=body)

    return handle


def page_script(section: str, client: object) -> None:
    """Runs as the page's script (its source alone: builtins only in the signature)."""
    import importlib

    importlib.import_module(f"ui.sections.{section}").render(client)


def app(section: str, client: ApiClient) -> AppTest:
    test = AppTest.from_function(page_script, args=(section, client), default_timeout=30)
    test.run()
    assert not test.exception, test.exception
    return test


def fake_api() -> tuple[ApiClient, list[httpx.Request]]:
    requests: list[httpx.Request] = []
    client = ApiClient("http://api", token="t0k", transport=httpx.MockTransport(canned(requests)))
    return client, requests


def texts(test: AppTest) -> str:
    parts = [m.value for m in test.markdown] + [c.value for c in test.caption]
    parts += [c.value for c in test.code] + [e.value for e in test.error]
    parts += [i.value for i in test.info] + [s.value for s in test.success]
    return "\n".join(str(p) for p in parts)


# -- pages -----------------------------------------------------------------------------------


@pytest.mark.parametrize("section", ["live", "map", "alerts", "runs", "try_it", "evaluation"])
def test_every_page_says_when_the_api_is_down(section: str) -> None:
    test = app(section, ApiClient(f"http://127.0.0.1:{free_port()}", token="t", timeout_s=2))
    if section == "try_it":  # it calls the API only when a transaction is sent
        test.button[0].click().run()
    errors = [e.value for e in test.error]
    assert errors and all("not reachable" in e and "streamsim api" in e for e in errors), errors


def test_runs_page_starts_a_run_with_the_moved_sliders() -> None:
    client, requests = fake_api()
    test = app("runs", client)
    assert test.selectbox(key="run-scenario").value == "sensors"
    assert test.select_slider(key="knob:sensors:entities").value == 20000
    test.select_slider(key="knob:sensors:entities").set_value(500)
    test.slider(key="knob:sensors:delivery.drops.probability").set_value(0.05)
    test.button[0].click().run()
    assert not test.exception
    assert "Started run `sensors-1` (pid 42)." in texts(test)
    (post,) = [r for r in requests if r.method == "POST"]
    assert post.headers["authorization"] == "Bearer t0k"
    body = json.loads(post.content)
    assert body["scenario"] == "sensors" and body["overrides"]["entities"] == 500
    assert body["overrides"]["delivery"] == {"drops": {"probability": 0.05}}
    assert body["overrides"]["classes"]["legacy_logger"]["delivery"]["drops"]["probability"] == 0.05
    assert "No runs yet" in texts(test)


def test_runs_page_without_a_token_is_read_only() -> None:
    requests: list[httpx.Request] = []
    client = ApiClient("http://api", token="", transport=httpx.MockTransport(canned(requests)))
    test = app("runs", client)
    assert test.button[0].disabled
    assert "STREAMSIM_API_TOKEN" in texts(test)


def test_try_it_sends_a_typed_card_once_and_keeps_none_of_it() -> None:
    client, requests = fake_api()
    test = app("try_it", client)
    test.text_input(key="try-own-card").input(PAN[:4] + " " + PAN[4:])
    test.button[0].click().run()
    assert not test.exception
    (post,) = [r for r in requests if r.method == "POST"]
    assert json.loads(post.content)["card_number"] == PAN
    assert "Verdict: DECLINE" in texts(test) and "•••• 5556" in texts(test)
    assert test.text_input(key="try-own-card").value == ""
    assert PAN not in repr(test.session_state.to_dict())
    test.button[0].click().run()  # the next send uses the picked test card again
    second = [r for r in requests if r.method == "POST"][1]
    assert (
        json.loads(second.content)["card_number"] == try_it.TEST_CARDS["Visa test card ending 1111"]
    )


def test_map_page_highlights_the_decline() -> None:
    client, _ = fake_api()
    test = app("map", client)
    shown = texts(test)
    assert "2 recent decisions (2 located), 1 flagged" in shown
    assert "•••• 4444** decline (impossible_travel) in AU" in shown
    assert len(test.get("deck_gl_json_chart")) == 1


def test_alerts_page_shows_evidence() -> None:
    client, _ = fake_api()
    shown = texts(app("alerts", client))
    assert "tx_count: 9" in shown and "card_testing" in shown
    assert "DECLINE" in shown and "impossible: True" in shown and "speed_kmh: 101,932.6" in shown


def test_live_and_evaluation_pages() -> None:
    client, _ = fake_api()
    live = app("live", client)
    assert [m.value for m in live.metric][:2] == ["2,718/s", "2,718/s"]
    assert "No pipeline progress" in texts(live)
    evaluation_page = app("evaluation", client)
    assert evaluation.NO_EVALUATION in texts(evaluation_page)


def test_live_page_shows_the_lag_on_the_streams_own_clock() -> None:
    """A simulated stream's watermark trails wall clock by months: the page shows how far it
    trails the newest event read, and the records behind the topic's end."""
    query = {"query": "alerts", "job": "cards", "mode": "append", "batch_id": 4,
             "watermark_ms": NOW - 327 * 86_400_000, "watermark_delay_s": 327 * 86_400.0,
             "watermark_behind_newest_s": 125.0, "offsets_behind": 1_500,
             "late_events_seen": 3}  # fmt: skip
    pipeline = {"queries": [query], "jobs": [{"job": "cards", "late_events_seen": 3}],
                "source": SOURCE}  # fmt: skip
    fallback = canned([])

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/pipeline":
            return httpx.Response(200, json=pipeline)
        return fallback(request)

    live = app("live", ApiClient("http://api", token="t0k", transport=httpx.MockTransport(handle)))
    (table,) = [t.value for t in live.table if "watermark behind newest" in t.value.columns]
    assert list(table["watermark behind newest"]) == ["2.1 min"]
    assert list(table["behind topic end (records)"]) == ["1,500"]
    assert "watermark behind (s)" not in table.columns


# -- helpers ---------------------------------------------------------------------------------


def test_map_points_arcs_and_view() -> None:
    points = map.located([DECLINE, APPROVE, {**APPROVE, "lat": None, "lon": None}])
    assert [p["card"] for p in points] == ["•••• 4444", "•••• 4444"]
    assert points[0]["color"] == map.COLORS["decline"] and points[0]["radius"] > points[1]["radius"]
    assert PAN not in json.dumps(points)
    (arc,) = map.travel_arcs([DECLINE, APPROVE])
    assert arc["from"] == [0, 51.5] and arc["to"] == [151.21, -33.87]
    lon, lat, zoom = map.view_of(points)
    assert -180 < lon < 180 and -90 < lat < 90 and zoom < 8
    deck = map.deck([DECLINE, APPROVE], basemap=False)
    assert "OrthographicView" in deck.to_json() and "carto" not in deck.to_json()


def test_evidence_and_frames() -> None:
    lines = alerts.evidence_lines({"travel": {"impossible": True, "gap_s": 600.0}, "ids": [1, 2]})
    assert lines == ["travel:", "  impossible: True", "  gap_s: 600", "ids: [1, 2]"]
    assert list(alerts.fired_evidence(DECLINE)) == ["travel"]
    assert list(alerts.fired_evidence({**DECLINE, "reasons": []})) == ["travel", "velocity"]
    report = {
        "scenario": "cards",
        "paths": {
            "endpoint": {
                "impossible_travel": {
                    "precision": 0.9,
                    "recall": None,
                    "f1": 0.5,
                    "support": 3,
                    "latency_ms": {"p50": 3.0, "p99": 9.0},
                }
            }
        },
    }
    scores = evaluation.scores_frame(report)
    assert len(scores) == 3 and scores["value"].isna().sum() == 1
    assert list(evaluation.latency_frame(report)["ms"]) == [3.0, 9.0]


def test_try_it_transaction_body() -> None:
    body = try_it.transaction(
        PAN,
        amount=10.0,
        city="Sydney, AU",
        channel="card_present",
        category="grocery (5411)",
        merchant_id="m-1",
        minutes_ago=10,
        now_ms=NOW,
        transaction_id="t-9",
    )
    assert body["event_time"] == NOW - 600_000 and body["currency"] == "AUD"
    assert (body["lat"], body["lon"], body["country"]) == (-33.8688, 151.2093, "AU")
    online = try_it.transaction(
        PAN, amount=1.0, city="Sydney, AU", channel="online", category="grocery (5411)",
        merchant_id="m-1", minutes_ago=0, now_ms=NOW,
    )  # fmt: skip
    assert "lat" not in online and "terminal_id" not in online
