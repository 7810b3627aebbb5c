"""The control panel in a real headless Chromium, against a real `streamsim api` and broker.

Real data goes in first: transactions posted to the endpoint (one an impossible-travel
decline), a pipeline alert and a progress report on their topics (as the Spark jobs write
them). Then, page by page, the test drives the UI like a user:
- Runs: starts the sensor fleet with the "Start run" button (a real `streamsim simulate`);
- Live: the readings topic shows a nonzero rate, the pipeline table shows the query;
- Map: the declined card shows by its last 4 with its reason (and the map canvas renders);
- Alerts: the pipeline alert and the endpoint's decline with their evidence;
- Try it: the form's verdict;
- Evaluation: "no evaluation yet", then charts once a report exists;
- Runs: stops the run with its "Stop" button.
No page ever contains a full card number. A screenshot of the map goes to
.data/ui-screenshot.png (the other pages next to it).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer

from core.config import StackConfig
from core.kafka import ensure_topics, producer_config
from tests.integration.ui_stack import (
    WAIT_S,
    By,
    Stack,
    WebDriver,
    WebDriverWait,
    body_text,
    click_button,
    log_in,
    nonzero_rate,
    open_page,
    shoot,
    wait_text,
)

pytestmark = pytest.mark.integration
pytest_plugins = ("tests.integration.ui_stack",)

TRAVEL_PAN = "5555555555554444"  # London, then Sydney ten minutes later: declined
ONLINE_PAN = "378282246310005"
FORM_PAN = "4111111111111111"  # the UI's "Visa test card ending 1111"
PANS = (TRAVEL_PAN, ONLINE_PAN, FORM_PAN)


def no_pan(driver: WebDriver) -> None:
    source = driver.page_source
    for pan in PANS:
        assert pan not in source, f"a full card number is on {driver.current_url}"


# -- real data -------------------------------------------------------------------------------


def transaction(
    txid: str, pan: str, at_ms: int, where: tuple[float, float] | None, country: str
) -> dict:
    body = {
        "transaction_id": txid,
        "card_number": pan,
        "amount": 120.0,
        "currency": "EUR",
        "merchant_id": "m-ui-test",
        "merchant_category": "5411",
        "channel": "card_present" if where else "online",
        "country": country,
        "event_time": at_ms,
    }
    if where:
        body.update(lat=where[0], lon=where[1], terminal_id="pos-ui-test")
    return body


def produce_pipeline_records(
    kafka_stack: StackConfig, tag: str, query: str, event_ids: list[str]
) -> None:
    """One alert (about `event_ids`, on a card token of the test's own) and one progress
    report, as the Spark jobs publish them."""
    ensure_topics(kafka_stack, ["alerts", "metrics"])
    now = time.time_ns() // 1_000_000
    alert: dict[str, Any] = {
        "alert_id": f"ui-alert-{tag}",
        "rule": "velocity",
        "label": "card_testing",
        "entity_id": f"tok_{tag}" + "c" * 24,
        "event_time": now - 60_000,
        "event_ids": event_ids,
        "evidence": {"tx_count": 9, "min_count": 5, "window_s": 600.0},
        "source": "pipeline",
        "job": "cards",
        "detected_at": now,
    }
    progress = {
        "schema": "pipeline.progress/1",
        "job": "cards",
        "mode": "microbatch",
        "query": query,
        "batch_id": 12,
        "input_rows": 480,
        "input_rows_per_s": 96.0,
        "processed_rows_per_s": 850.0,
        "watermark": "2026-01-01T00:10:00.000Z",
        "dropped_by_watermark": 7,
        "duration_ms": 310,
        "at": now,
    }
    producer = Producer(producer_config(kafka_stack))
    producer.produce("alerts", orjson.dumps(alert), alert["entity_id"].encode())
    producer.produce("metrics", orjson.dumps(progress), query.encode())
    assert producer.flush(30) == 0


EVALUATION = {
    "scenario": "cards",
    "run": {"id_prefix": "cv-ui-", "events": 12345, "speed": 60.0},
    "paths": {
        "endpoint": {
            "impossible_travel": {"precision": 0.92, "recall": 0.81, "f1": 0.86, "support": 40,
                                  "latency_ms": {"p50": 3.0, "p99": 9.0}},
            "card_testing": {"precision": 0.75, "recall": 0.6, "f1": 0.67, "support": 25,
                             "latency_ms": {"p50": 40000.0, "p99": 120000.0}},
        },
        "pipeline": {
            "impossible_travel": {"precision": 0.88, "recall": 0.85, "f1": 0.86, "support": 40,
                                  "latency_ms": {"p50": 2500.0, "p99": 8000.0}},
        },
    },
    "late_dropped": 17,
    "hard_negative_alerts": 2,
}  # fmt: skip


# -- the test --------------------------------------------------------------------------------


def test_control_panel_in_a_real_browser(
    kafka_stack: StackConfig, fresh_servers: Stack, browser: WebDriver
) -> None:
    """On servers of its own: it asserts on their whole state (the one run, the request count,
    no evaluation yet)."""
    servers = fresh_servers
    http, ui = servers.http, servers.ui_url
    now = time.time_ns() // 1_000_000
    sent = [
        transaction("ui-t1", TRAVEL_PAN, now - 600_000, (51.5074, -0.1278), "GB"),
        transaction("ui-t2", TRAVEL_PAN, now, (-33.8688, 151.2093), "AU"),
        transaction("ui-t3", ONLINE_PAN, now, None, "FR"),
    ]
    verdicts = [http.post("/v1/transactions", json=body).json() for body in sent]
    assert verdicts[1]["decision"] == "decline" and verdicts[1]["reasons"] == ["impossible_travel"]
    tag = uuid.uuid4().hex[:8]
    query = f"ui-test-query-{tag}"
    # the alerts topic is shared: the page must show this alert, known by its own event ids
    event_ids = [f"cv-ui-{tag}-{i}" for i in range(1, 4)]
    produce_pipeline_records(kafka_stack, tag, query, event_ids)

    # Runs: start the sensor fleet from the form.
    open_page(browser, f"{ui}/runs?scenario=sensors", "Scenario runs")
    wait_text(browser, "Start run", "Rate", "Clock skew", "Lateness and delivery faults")
    no_pan(browser)
    click_button(browser, "Start run", lambda d: "Started run" in body_text(d))
    runs = http.get("/v1/runs").json()["runs"]
    assert [(r["scenario"], r["status"]) for r in runs] == [("sensors", "running")], runs
    run_id = runs[0]["run_id"]
    wait_text(browser, run_id)
    shoot(browser, "ui-screenshot-runs.png")

    # Live: the run's readings arrive; the pipeline's report is shown.
    open_page(browser, f"{ui}/", "Live")
    WebDriverWait(browser, WAIT_S, poll_frequency=0.5).until(
        lambda d: nonzero_rate(d, "sensors.readings")
    )
    text = wait_text(browser, query, "Late rows dropped (seen)", "Fraud endpoint")
    assert "microbatch" in text
    no_pan(browser)
    shoot(browser, "ui-screenshot-live.png")

    # Map: the declined card by its last 4, with its reason; the deck.gl canvas is there.
    open_page(browser, f"{ui}/map", "Map")
    wait_text(browser, "•••• 4444 decline (impossible_travel) in AU", "flagged")
    WebDriverWait(browser, WAIT_S).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid='stDeckGlJsonChart'] canvas")
    )
    no_pan(browser)
    time.sleep(1.0)  # let WebGL paint before the picture (not an assertion)
    shoot(browser, "ui-screenshot.png")

    # Alerts: the pipeline's alert and the endpoint's decline, each with evidence.
    open_page(browser, f"{ui}/alerts", "Alerts")
    events = f"events: {', '.join(event_ids)}"
    text = wait_text(browser, "Pipeline detectors", events)
    end = text.index(events)  # this alert's card: from the previous card's events on
    card = text[max(text.rfind("events: ", 0, end), text.rfind("newest first.", 0, end)) : end]
    assert all(x in card for x in ("velocity", "card_testing", "tx_count: 9")), card
    text = wait_text(browser, "DECLINE •••• 4444", "impossible_travel", "impossible: True")
    assert "speed_kmh" in text
    no_pan(browser)
    shoot(browser, "ui-screenshot-alerts.png")

    # Try it: the default card in London; a first use has no history and is approved.
    open_page(browser, f"{ui}/try-it", "Try a transaction")
    click_button(browser, "Send transaction", lambda d: "Verdict:" in body_text(d))
    text = wait_text(browser, "Verdict: APPROVE for •••• 1111", "no_history", "Velocity evidence")
    no_pan(browser)
    shoot(browser, "ui-screenshot-try-it.png")
    assert http.get("/v1/stats").json()["requests"] == len(sent) + 1

    # Evaluation: none yet, then charts.
    open_page(browser, f"{ui}/evaluation", "Evaluation")
    wait_text(browser, "No evaluation yet")
    folder = servers.data / "evaluations"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cards-ui-test.json").write_bytes(orjson.dumps(EVALUATION))
    browser.refresh()
    log_in(browser)  # a reload is a new session
    wait_text(browser, "Detection quality", "cards-ui-test.json", "impossible_travel")
    WebDriverWait(browser, WAIT_S).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "[data-testid='stVegaLiteChart']")) >= 2
    )
    shoot(browser, "ui-screenshot-evaluation.png")

    # Runs: stop the run with its button.
    open_page(browser, f"{ui}/runs", "Scenario runs")
    wait_text(browser, run_id, "running")
    click_button(
        browser,
        "Stop",
        lambda d: http.get(f"/v1/runs/{run_id}").json()["status"] == "stopped",
    )
    wait_text(browser, "stopped")
    no_pan(browser)
    run = http.get(f"/v1/runs/{run_id}").json()
    assert run["status"] == "stopped" and run["exit_code"] == 130, run
