"""The Vehicles page in a real headless Chromium, against a real `streamsim api`, broker and
vehicles run.

- A short `vehicles` run (50 vehicles, through the control API) produces
  `vehicles.telemetry`;
- once the API shows a vehicle of the run with no alert (its latest reading one the run
  wrote: the topics also hold earlier runs' vehicles of the same ids and their alerts), one
  overheating alert for it goes to `alerts` in the pipeline's format (evidence a JSON string,
  job `vehicles`), at the event time of that vehicle's latest reading, and a progress
  report of the job (a query name of its own) to `metrics`;
- the page shows the fleet (a nonzero count, the vehicle on the map), the alert with its
  evidence, the job's late drops, and the alerting vehicle's telemetry charts;
- its "Stop" button stops the run.
A screenshot goes to .data/ui-vehicles.png.
"""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from confluent_kafka import Producer

from core.config import StackConfig
from core.contracts import topics
from core.kafka import ensure_topics, producer_config
from core.kafka.offsets import end_offsets
from core.kafka.reader import read_topic
from simulators.seeds import id_salt
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
TOPIC = topics.VEHICLES_TELEMETRY.name
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def run_prefix(stack: Stack, run_id: str) -> str:
    """The event-id prefix of the run: its scenario file's id prefix, seed and run id."""
    run = stack.http.get(f"/v1/runs/{run_id}", headers=AUTH).json()
    written = yaml.safe_load((Path(run["workdir"]) / "scenario.yaml").read_text())
    return f"{written['domain']['id_prefix']}-{id_salt(written['seed'], written['run_id'])}-"


def a_moving_vehicle(
    stack: Stack, kafka_stack: StackConfig, run_id: str, since: dict[int, int]
) -> dict[str, Any]:
    """A vehicle that the API shows moving with a GPS fix and no alert yet, its latest reading
    one of this run's (waits for one). The topics are shared: earlier runs (a demo's, say) left
    vehicles of the same ids in `vehicles.telemetry`, and their jobs' alerts about them in
    `alerts`, which the API reads back on start; the alert this test publishes must be the
    vehicle's only one."""
    prefix = run_prefix(stack, run_id)
    deadline = time.monotonic() + WAIT_S
    fleet: dict[str, Any] = {}
    while time.monotonic() < deadline:
        run = stack.http.get(f"/v1/runs/{run_id}").json()
        assert run["status"] == "running", run
        fleet = stack.http.get("/v1/vehicles", params={"status": "moving"}).json()
        ours = {
            (r["vehicle_id"], r["seq"], r["event_time"])
            for r in read_topic(kafka_stack, TOPIC, since=since)
            if str(r.get("event_id", "")).startswith(prefix)
        }
        located = [
            v
            for v in fleet["vehicles"]
            if v["lat"] is not None
            and v["history"] >= 3
            and v["alerts"] == 0
            and (v["vehicle_id"], v["seq"], v["event_time"]) in ours
        ]
        if located:
            return dict(located[0])
        time.sleep(0.5)
    raise AssertionError(f"no moving vehicle of run {prefix}* after {WAIT_S}s: {fleet}")


def publish_vehicle_alert(
    kafka_stack: StackConfig, vehicle: dict[str, Any], alert_id: str, query: str
) -> dict[str, Any]:
    """One overheating alert as the vehicles job writes it, and one progress report."""
    ensure_topics(kafka_stack, ["alerts", "metrics"])
    now = time.time_ns() // 1_000_000
    alert = {
        "alert_id": alert_id,
        "rule": "threshold",
        "label": "overheating",
        "entity_id": vehicle["vehicle_id"],
        "event_time": vehicle["event_time"],
        "event_ids": [f"{alert_id}-{i}" for i in range(3)],
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
        "job": "vehicles",
        "detected_at": now,
    }
    progress = {
        "schema": "pipeline.progress/1",
        "job": "vehicles",
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
        "newest_event_ms": 1_772_524_860_000,  # 2026-03-03T08:01:00Z: 30 s past the watermark
        "offsets_behind": 25,
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
    ensure_topics(kafka_stack, [TOPIC])
    before = end_offsets(kafka_stack, TOPIC)  # where this run's readings begin
    started = http.post(
        "/v1/control/runs",
        headers=AUTH,
        json={
            "scenario": "vehicles",
            "speed": 2.0,
            "duration_s": 1800,
            "overrides": {"entities": VEHICLES},
        },
    )
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]

    vehicle = a_moving_vehicle(servers, kafka_stack, run_id, before)
    vehicle_id = vehicle["vehicle_id"]
    query = f"vehicle-alerts-ui-{uuid.uuid4().hex[:6]}"
    publish_vehicle_alert(kafka_stack, vehicle, f"ui-veh-alert-{uuid.uuid4().hex[:8]}", query)

    browser.set_window_size(1400, 3000)  # the whole page in the picture
    open_page(browser, f"{ui}/vehicles", "Vehicles")
    # The fleet, live: a nonzero count, the run, the job's figures.
    text = wait_text(browser, "Vehicles seen", "Moving", f"run {run_id} running", "Stop")
    WebDriverWait(browser, WAIT_S, poll_frequency=0.5).until(lambda d: seen_count(d) > 0)
    text = wait_text(
        browser,
        "vehicles rows/s",
        "Late events dropped (seen)",
        "Watermark behind newest reading",
        "Behind the topic's end",
    )
    # The metrics topic is shared: the figure is the job's largest over its queries, other
    # tests' vehicles runs' among them. This report's query counts its 3 (not the
    # operators' 6), and the page shows the API's figure for the job.
    late = int(text.split("Late events dropped (seen)\n", 1)[1].split("\n", 1)[0].replace(",", ""))
    pipeline = http.get("/v1/pipeline").json()
    (ours,) = [q for q in pipeline["queries"] if q["query"] == query]
    (job,) = [j for j in pipeline["jobs"] if j["job"] == "vehicles"]
    assert ours["late_events_seen"] == 3 and 3 <= late <= job["late_events_seen"], (late, job)
    # Lag on the simulated clock (newest reading minus watermark) and in records behind the
    # topic's end; the page's figures are the job's largest, this report's among them.
    assert ours["watermark_behind_newest_s"] == 30.0 and ours["offsets_behind"] == 25, ours
    behind = metric_value(browser, "Behind the topic's end")
    assert behind is not None and int(behind.replace(",", "")) >= 25, behind
    assert metric_value(browser, "Watermark behind newest reading") not in (None, "—")
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
    text = wait_text(
        browser,
        "recent readings",
        "red rules: its alerts at their event times",
        "Clock offsets",  # the fleet's histogram, or where it comes from
    )
    # beside its readings, its clock's estimated offset, or where estimates come from
    assert re.search(r"Clock offset( [+-]\d|: no estimate yet)", text), text
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


def metric_value(driver: WebDriver, name: str) -> str | None:
    """The shown value of the metric labelled `name` (None: no such metric)."""
    for metric in driver.find_elements(By.CSS_SELECTOR, "[data-testid='stMetric']"):
        try:
            label, value, *_ = metric.text.splitlines()
        except ValueError:
            continue
        if label.strip() == name:
            return value.strip()
    return None


def seen_count(driver: WebDriver) -> int:
    """The "Vehicles seen" metric's value (0 until it shows a number)."""
    digits = (metric_value(driver, "Vehicles seen") or "").replace(",", "")
    return int(digits) if digits.isdigit() else 0
