"""The Sensors page rendered by Streamlit's AppTest against canned API answers (made by the
API's own `SensorView`), with no reading yet and with the API down; and its pure helpers."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import httpx
from streamlit.testing.v1 import AppTest

from live.views.clock import OffsetTable
from live.views.sensors import SensorView, run_alerts
from tests.conftest import free_port
from tests.unit.test_ui_pages import texts
from ui.client import ApiClient
from ui.sections import sensors

RUN = "sf-aaaa0001"
T0 = 1_772_524_800_000  # the scenario's simulated clock
SOURCE = {"topic": "alerts", "status": "live", "partitions": 1, "error": None}
FEED = {"error": None, "records_read": 9, "records_skipped": 0, "read_cap_per_s": 2000}


def reading(sensor: str, seq: int, site: str, **more: Any) -> dict[str, Any]:
    return {
        "schema": "sensor.reading/1",
        "event_id": f"{RUN}-{sensor[-2:]}{seq:03d}",
        "sensor_id": sensor,
        "event_time": 1_767_225_600_000 + 5_000 * seq,
        "seq": seq,
        "site": site,
        "temperature_c": 21.0 + seq,
        "humidity_pct": 45.0,
        "battery_v": 3.35,
        "status": "low_battery" if sensor.endswith("3") else "ok",
        **more,
    }


STUCK = {
    "alert_id": "al-stuck",
    "rule": "flatline",
    "label": "stuck_sensor",
    "entity_id": "sensor-000002",
    "event_time": 1_767_225_605_000,
    "event_ids": [f"{RUN}-x"],
    "evidence": {"readings": 3, "spread": 0.0},
    "source": "pipeline",
    "job": "sensors",
    "detected_at": 1_767_225_700_000,
}


def canned_view() -> SensorView:
    view = SensorView()
    for seq in range(3):
        view.add(reading("sensor-000001", seq, "Port Jennifer"))
        view.add(reading("sensor-000002", seq, "Lake Amy"))
        view.add(reading("sensor-000003", seq, "Lake Amy", humidity_pct=None))
    return view


def fake_api(view: SensorView, clock: OffsetTable | None = None) -> tuple[ApiClient, list[str]]:
    paths: list[str] = []
    clock = clock or OffsetTable()

    def handle(request: httpx.Request) -> httpx.Response:
        path = unquote(request.url.path)
        paths.append(path)
        run = view.run_of_request(request.url.params.get("run"))
        alerts = run_alerts([STUCK], run, view.has_device)
        if path == "/v1/sensors":
            body = {**view.fleet(run, alerts), "source": FEED}
        elif path == "/v1/sensors/clock-offsets":
            body = {**clock.histogram(5.0), "source": {"topic": "sensors.clock-offsets"}}
        elif path == "/v1/sensors/alerts":
            body = {"run": RUN, "alerts": alerts, "count": len(alerts), "source": SOURCE}
        elif path.endswith("/series"):
            sensor = path.split("/")[3]
            found = view.series(sensor, run)
            if found is None:
                return httpx.Response(404, json={"detail": f"no reading of {sensor}"})
            body = {
                **found,
                "alerts": [a for a in alerts if a["entity_id"] == sensor],
                "clock": clock.offset(sensor),
            }
        else:
            return httpx.Response(404, json={"detail": "not here"})
        return httpx.Response(200, json=body)

    return ApiClient("http://api", token="", transport=httpx.MockTransport(handle)), paths


def page_script(client: object) -> None:
    from ui.sections import sensors

    sensors.render(client)


def run_page(client: ApiClient) -> AppTest:
    test = AppTest.from_function(page_script, args=(client,), default_timeout=30)
    test.run()
    assert not test.exception, test.exception
    return test


def offsets() -> OffsetTable:
    """Sensor 2's clock 7.5 s ahead, sensor 1's 3 s behind, sensor 3's reset to an epoch."""
    table = OffsetTable()
    for device, ms, reset in [
        ("sensor-000001", -3_000, False),
        ("sensor-000002", 7_500, False),
        ("sensor-000003", 1_000, False),
        ("sensor-000003", 830_000_000_000, True),
    ]:
        table.add(
            {
                "device_id": device,
                "offset_estimate_ms": ms,
                "reset": reset,
                "records": 12,
                "as_of": T0 + (60_000 if reset else 30_000),
            }
        )
    return table


def test_page_shows_devices_the_alerting_ones_series_and_the_alerts() -> None:
    client, paths = fake_api(canned_view(), offsets())
    test = run_page(client)
    metrics = {m.label: m.value for m in test.metric}
    assert metrics == {"Devices seen": "3", "Sites": "2", "Low battery": "1", "Sensor alerts": "1"}
    # the alerting device first, and charted
    assert test.selectbox(key=sensors.PICK_KEY).value == "sensor-000002"
    assert "/v1/sensors/sensor-000002/series" in paths
    assert [s.value for s in test.subheader] == [
        "Site map",
        "Series of sensor-000002",
        "Alerts",
        "Clock offsets",
    ]
    assert len(test.get("vega_lite_chart")) == 3  # the site map, the series, the offsets
    shown = texts(test)
    assert "Clock offset +7.5 s (its clock runs ahead; estimated over 12 records" in shown
    # the reset clock is counted apart, not binned at decades
    assert "2 sensors · median +7.5 s · largest ±7.5 s · 1 with a clock reset" in shown
    (table,) = test.table
    row = table.value.iloc[0]
    assert (row["label"], row["device"]) == ("stuck_sensor", "sensor-000002")
    assert row["evidence"] == "readings: 3; spread: 0"

    test.selectbox(key=sensors.PICK_KEY).set_value("sensor-000001").run()
    assert not test.exception
    assert "/v1/sensors/sensor-000001/series" in paths
    assert "Series of sensor-000001" in [s.value for s in test.subheader]
    assert "Clock offset -3.0 s (its clock runs behind" in texts(test)


def test_run_picker_shows_an_earlier_run() -> None:
    view = canned_view()
    view.add(reading("sensor-000009", 0, "Elsewhere", event_id="sf-later-000"))
    test = run_page(fake_api(view)[0])
    assert {m.label: m.value for m in test.metric}["Devices seen"] == "1"  # the newest run's
    test.selectbox(key=sensors.RUN_KEY).set_value(RUN).run()
    assert not test.exception
    assert {m.label: m.value for m in test.metric}["Devices seen"] == "3"


def test_without_offsets_the_page_says_where_they_come_from() -> None:
    test = run_page(fake_api(canned_view())[0])
    shown = texts(test)
    assert "Clock offset: no estimate yet (the sensors job publishes them" in shown
    assert "No clock offset on `sensors.clock-offsets` yet" in shown
    assert len(test.get("vega_lite_chart")) == 2


def test_page_without_readings_or_api_says_what_to_start() -> None:
    client, _ = fake_api(SensorView())
    test = run_page(client)
    assert any(sensors.START_RUN in i.value for i in test.info), [i.value for i in test.info]
    assert not test.metric
    down = run_page(ApiClient(f"http://127.0.0.1:{free_port()}", token="", timeout_s=2))
    assert down.error and "Reading the sensors failed" in down.error[0].value


def test_helpers() -> None:
    devices = [
        {"sensor_id": "b", "alerts": 0},
        {"sensor_id": "c", "alerts": 2},
        {"sensor_id": "a", "alerts": 0},
    ]
    assert sensors.device_order(devices) == ["c", "a", "b"]
    frame = sensors.series_frame(
        [{"event_time": 0, "temperature_c": 1.0, "humidity_pct": None, "battery_v": 3.9}]
    )
    assert list(frame["signal"]) == ["temperature_c", "battery_v"]
    rows = sensors.alert_rows([{**STUCK, "label": None}])
    assert rows.iloc[0]["label"] == "flatline"
    assert rows.iloc[0]["detected (UTC)"] == "2026-01-01 00:01:40"
    site = {"site": "A", "x": 1.0, "y": 2.0, "devices": 3, "alerts": 1}
    named = sensors.site_map([site]).to_dict()
    assert [layer["mark"]["type"] for layer in named["layer"]] == ["circle", "text"]
    crowded = sensors.site_map([{**site, "site": f"S{i}"} for i in range(sensors.MAP_LABELS + 1)])
    assert [layer["mark"]["type"] for layer in crowded.to_dict()["layer"]] == ["circle"]
