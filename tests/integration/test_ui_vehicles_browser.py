"""The Vehicles page in a real headless Chromium, against a real `streamsim api`, broker and
connected-vehicles run.

- A short `connected_vehicles` run (50 vehicles, through the control API) produces
  `vehicles.telemetry`;
- once the API has vehicles, one overheating alert for one of them goes to `alerts` in the
  pipeline's format (evidence a JSON string, job `vehicle-telemetry`), at the event time of
  that vehicle's latest reading, and a progress report of the job to `metrics`;
- the page shows the fleet (a nonzero count, the vehicle on the map), the alert with its
  evidence, the job's late drops, and the alerting vehicle's telemetry charts;
- its "Stop" button stops the run.
A screenshot goes to .data/ui-vehicles.png.
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
    TOKEN,
    WAIT_S,
    By,
    Stack,
    WebDriver,
    WebDriverWait,
    click_button,
    open_page,
    shoot,
    wait_text,
)

pytestmark = pytest.mark.integration
pytest_plugins = ("tests.integration.ui_stack",)

VEHICLES = 50


def a_moving_vehicle(stack: Stack, run_id: str) -> dict[str, Any]:
    """A vehicle of this run that the API shows moving with a GPS fix (waits for one)."""
    deadline = time.monotonic() + WAIT_S
    fleet: dict[str, Any] = {}
    while time.monotonic() < deadline:
        run = stack.http.get(f"/v1/runs/{run_id}").json()
        assert run["status"] == "running", run
        fleet = stack.http.get("/v1/vehicles", params={"status": "moving"}).json()
        located = [v for v in fleet["vehicles"] if v["lat"] is not None and v["history"] >= 3]
        if located:
            return dict(located[0])
        time.sleep(0.5)
    raise AssertionError(f"no moving vehicle after {WAIT_S}s: {fleet}")


def publish_vehicle_alert(
    kafka_stack: StackConfig, vehicle: dict[str, Any], alert_id: str, query: str
) -> dict[str, Any]:
    """One overheating alert as the vehicle-telemetry job writes it, and one progress report."""
    ensure_topics(kafka_stack, ["alerts", "metrics"])
    now = time.time_ns() // 1_000_000
    alert = {
        "alert_id": alert_id,
        "rule": "threshold",
        "label": "overheating",
        "entity_id": vehicle["vehicle_id"],
        "event_time": vehicle["event_time"],
        "event_ids": [f"cv-ui-{i}" for i in range(3)],
        "evidence": orjson.dumps(
            {
                "signal": "coolant_c",
                "value": 118.4,
                "readings": 61,
                "duration_s": 60.0,
                "above": 105.0,
                "below": None,
                "min_duration_s": 60.0,
            }
        ).decode(),
        "source": "pipeline",
        "job": "vehicle-telemetry",
        "detected_at": now,
    }
    progress = {
        "schema": "pipeline.progress/1",
        "job": "vehicle-telemetry",
        "mode": "microbatch",
        "query": query,
        "batch_id": 7,
        "input_rows": 900,
        "input_rows_per_s": 45.0,
        "processed_rows_per_s": 620.0,
        "watermark": "2026-03-03T08:00:30.000Z",
        "dropped_by_watermark": 6,  # two operators dropped the same 3 readings
        "late_events": 3,
        "duration_ms": 410,
        "at": now,
    }
    producer = Producer(producer_config(kafka_stack))
    producer.produce("alerts", orjson.dumps(alert), vehicle["vehicle_id"].encode())
    producer.produce("metrics", orjson.dumps(progress), query.encode())
    assert producer.flush(30) == 0
    return alert


def test_vehicles_page_in_a_real_browser(
    kafka_stack: StackConfig, servers: Stack, browser: WebDriver
) -> None:
    http, ui = servers.http, servers.ui_url
    started = http.post(
        "/v1/control/runs",
        headers={"Authorization": f"Bearer {TOKEN}"},
        json={
            "scenario": "connected_vehicles",
            "speed": 2.0,
            "duration_s": 1800,
            "overrides": {"entities": VEHICLES},
        },
    )
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]

    vehicle = a_moving_vehicle(servers, run_id)
    vehicle_id = vehicle["vehicle_id"]
    query = f"vehicle-alerts-ui-{uuid.uuid4().hex[:6]}"
    publish_vehicle_alert(kafka_stack, vehicle, f"ui-veh-alert-{uuid.uuid4().hex[:8]}", query)

    browser.set_window_size(1400, 3000)  # the whole page in the picture
    open_page(browser, f"{ui}/vehicles", "Vehicles")
    # The fleet, live: a nonzero count, the run, the job's figures.
    text = wait_text(browser, "Vehicles seen", "Moving", f"run {run_id} running", "Stop")
    WebDriverWait(browser, WAIT_S, poll_frequency=0.5).until(lambda d: seen_count(d) > 0)
    text = wait_text(
        browser, "vehicle-telemetry rows/s", "Late events dropped (seen)", "Watermark lag"
    )
    # The session's metrics topic is shared: other tests' vehicle-telemetry runs may add theirs.
    late = int(text.split("Late events dropped (seen)\n", 1)[1].split("\n", 1)[0].replace(",", ""))
    assert late >= 3, text
    # The alert with its evidence; the alerting vehicle is the one charted.
    text = wait_text(
        browser,
        "Vehicle alerts",
        f"overheating · {vehicle_id}",
        "value: 118.4",
        "above: 105",
        f"Telemetry of {vehicle_id}",
        "Its alerts",
    )
    assert "coolant_c" in text
    # The map and the telemetry charts (speed, coolant, battery, tyres, acceleration).
    WebDriverWait(browser, WAIT_S).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid='stDeckGlJsonChart'] canvas")
    )
    WebDriverWait(browser, WAIT_S).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "[data-testid='stVegaLiteChart']")) >= 5
    )
    text = wait_text(browser, "recent readings", "red rules: its alerts at their event times")
    assert "alerts outside this window" not in text  # the alert's rule is on the charts
    time.sleep(1.5)  # let WebGL and Vega paint before the picture (not an assertion)
    shoot(browser, "ui-vehicles.png")

    # The page's Stop button stops the run.
    click_button(
        browser,
        "Stop",
        lambda d: http.get(f"/v1/runs/{run_id}").json()["status"] == "stopped",
    )
    run = http.get(f"/v1/runs/{run_id}").json()
    assert run["status"] == "stopped", run


def seen_count(driver: WebDriver) -> int:
    """The "Vehicles seen" metric's value (0 until it shows a number)."""
    for metric in driver.find_elements(By.CSS_SELECTOR, "[data-testid='stMetric']"):
        try:
            label, value, *_ = metric.text.splitlines()
        except ValueError:
            continue
        if label.strip() == "Vehicles seen":
            digits = value.replace(",", "").strip()
            return int(digits) if digits.isdigit() else 0
    return 0
