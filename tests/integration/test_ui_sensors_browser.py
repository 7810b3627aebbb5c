"""The Sensors page in a real headless Chromium, against a real `streamsim api` and broker.

The test writes a sensors run of its own (a run id no other writer uses: the topics are
shared) straight to `sensors.readings`: three devices at two sites, six readings each, one of
them spiking; and four alerts to `alerts` in the pipeline's format (job `sensors`,
evidence a JSON string): spike and silent_device for one device, low_battery for another, and
one of another run, which the page must not show. The page shows the run's devices, the
alerting device's series, and the run's three alerts.
A screenshot goes to .data/screenshots/ui-sensors.png.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer

from core.config import StackConfig
from core.contracts import topics
from core.kafka import ensure_topics, producer_config
from core.kafka.compacted import ensure_compacted
from tests.integration.test_ui_vehicles_browser import metric_value
from tests.integration.ui_stack import (
    WAIT_S,
    By,
    Stack,
    WebDriver,
    WebDriverWait,
    open_page,
    shoot,
    wait_text,
)

pytestmark = pytest.mark.integration
pytest_plugins = ("tests.integration.ui_stack",)

READINGS, ALERTS = topics.SENSORS_READINGS.name, topics.ALERTS.name
OFFSETS = topics.clock_offsets("sensors").name
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def readings(run: str, sensors: dict[str, str]) -> list[dict[str, Any]]:
    """Six readings 5 s apart per sensor; the second sensor's fourth reading spikes."""
    rows = []
    for n, (sensor, site) in enumerate(sensors.items()):
        for seq in range(6):
            spike = n == 1 and seq == 3
            rows.append(
                {
                    "schema": "sensor.reading/1",
                    "event_id": f"{run}-{n}{seq:03d}",
                    "sensor_id": sensor,
                    "event_time": START_MS + 5_000 * seq,
                    "seq": seq,
                    "site": site,
                    "temperature_c": 21.5 + 0.1 * seq + (25.0 if spike else 0.0),
                    "humidity_pct": 45.0,
                    "battery_v": 3.31 if n == 2 else 3.9,
                    "status": "low_battery" if n == 2 else "ok",
                }
            )
    return rows


def alert(run: str, label: str, sensor: str, seq: int, **evidence: Any) -> dict[str, Any]:
    return {
        "alert_id": f"ui-sensor-{uuid.uuid4().hex[:10]}",
        "rule": label,
        "label": label,
        "entity_id": sensor,
        "event_time": START_MS + 5_000 * seq,
        "event_ids": [f"{run}-1{seq:03d}"] if label != "silent_device" else [],
        "evidence": orjson.dumps(evidence).decode(),
        "source": "pipeline",
        "job": "sensors",
        "detected_at": time.time_ns() // 1_000_000,
    }


def test_sensors_page_in_a_real_browser(
    kafka_stack: StackConfig, servers: Stack, browser: WebDriver
) -> None:
    run = f"sf-ui{uuid.uuid4().hex[:8]}"
    other = f"sf-ui{uuid.uuid4().hex[:8]}"
    tag = run[-4:]
    sensors = {
        f"sensor-{tag}-1": "Testville North",
        f"sensor-{tag}-2": "Testville North",
        f"sensor-{tag}-3": "Lake Probe",
    }
    one, spiking, low = sensors
    ensure_topics(kafka_stack, [READINGS, ALERTS])
    producer = Producer(producer_config(kafka_stack))
    for row in readings(run, sensors):
        producer.produce(READINGS, orjson.dumps(row), row["sensor_id"].encode())
    assert producer.flush(30) == 0
    # The run's readings read first, so that the silence (no event id) finds its device.
    deadline = time.monotonic() + WAIT_S
    while servers.http.get("/v1/sensors", params={"run": run}).json()["count"] < 3:
        assert time.monotonic() < deadline, servers.http.get("/v1/sensors").json()
        time.sleep(0.3)
    for row in (
        alert(run, "spike", spiking, 3, delta_c=25.1, min_delta_c=10.0),
        alert(run, "silent_device", spiking, 5, silent_s=60.0, intervals=3),
        alert(run, "low_battery", low, 5, battery_v=3.31, below_v=3.4),
        alert(other, "stuck_sensor", f"sensor-{tag}-9", 2, readings=4),
    ):
        producer.produce(ALERTS, orjson.dumps(row), row["entity_id"].encode())
    assert producer.flush(30) == 0
    # The charted device's clock offset, as the sensors job publishes it on corrected time.
    ensure_compacted(kafka_stack, OFFSETS)
    offset = {
        "device_id": spiking,
        "offset_estimate_ms": 7_500,
        "reset": False,
        "records": 12,
        "as_of": time.time_ns() // 1_000_000,
    }
    producer.produce(OFFSETS, orjson.dumps(offset), spiking.encode())
    assert producer.flush(30) == 0

    browser.set_window_size(1400, 2200)
    open_page(browser, f"{servers.ui_url}/sensors", "Sensors")
    wait_text(browser, "Devices seen", "Site map", run)
    WebDriverWait(browser, WAIT_S, poll_frequency=0.5).until(
        lambda d: metric_value(d, "Sensor alerts") == "3"
    )
    assert metric_value(browser, "Devices seen") == "3"
    assert metric_value(browser, "Sites") == "2"
    assert metric_value(browser, "Low battery") == "1"
    # The device with the most alerts is charted; the run's alerts with their evidence.
    text = wait_text(
        browser,
        f"Series of {spiking}",
        "6 recent readings",
        "spike",
        "silent_device",
        "low_battery",
        "delta_c: 25.1",
        "battery_v: 3.31",
    )
    # its estimated clock offset beside the series, and the fleet's offsets below
    wait_text(browser, "Clock offset +7.5 s (its clock runs ahead", "Clock offsets")
    assert "stuck_sensor" not in text and f"sensor-{tag}-9" not in text  # another run's
    assert one not in text.rsplit("Alerts", 1)[1]  # no alert of the first device
    WebDriverWait(browser, WAIT_S).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "[data-testid='stVegaLiteChart']")) >= 2
    )
    time.sleep(1.0)  # let Vega paint before the picture (not an assertion)
    shoot(browser, "screenshots/ui-sensors.png")
