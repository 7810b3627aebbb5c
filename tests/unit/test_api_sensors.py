"""The sensor feed without Kafka: the view (runs apart, bounds, out-of-order and retried
readings, malformed records, the site layout), which alerts are a run's sensor alerts, and the
routes (fleet, series, alerts, 404, 422, 503)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from confluent_kafka import KafkaException
from fastapi.testclient import TestClient

from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from api.main import create_app
from api.panel.models.sensors import SensorAlerts, SensorList, SensorSeries
from core.config import StackConfig
from core.kafka import follower as threads
from live.consumers.feeds import Feeds
from live.consumers.sensors import SensorFeed
from live.views.sensors import SensorView, is_sensor_alert, run_alerts, site_position

RUN, OTHER = "sf-aaaa0001", "sf-bbbb0002"


def reading(sensor: str, seq: int, t: int, run: str = RUN, **more: Any) -> dict[str, Any]:
    return {
        "schema": "sensor.reading/1",
        "event_id": f"{run}-{sensor[-3:]}{seq:04d}",
        "sensor_id": sensor,
        "event_time": t,
        "seq": seq,
        "site": more.pop("site", "Port Jennifer"),
        "temperature_c": 20.0 + seq,
        "humidity_pct": 45.0,
        "battery_v": 3.9,
        "status": "ok",
        **more,
    }


def alert(alert_id: str, sensor: str, label: str, run: str = RUN, **more: Any) -> dict[str, Any]:
    return {
        "alert_id": alert_id,
        "rule": label,
        "label": label,
        "entity_id": sensor,
        "event_time": 1_000,
        "event_ids": [f"{run}-x1", f"{run}-x2"],
        "evidence": {"readings": 3},
        "source": "pipeline",
        "job": "sensors",
        "detected_at": 5_000,
        **more,
    }


def test_view_keeps_runs_apart_with_series_in_event_time_order() -> None:
    view = SensorView(history_len=4)
    for seq in (2, 0, 1, 1, 3, 4):  # a shuffled flush and a retry of seq 1
        view.add(reading("sensor-000001", seq, 1_000 * seq))
    view.add(reading("sensor-000001", 0, 50, run=OTHER, site="Lake Amy"))
    assert view.run_of_request(None) == OTHER  # the newest run read
    series = view.series("sensor-000001", RUN, limit=10)
    assert series is not None
    # ring of 4: seq 2 left first; seq 1 twice, once in the answer
    assert [r["seq"] for r in series["readings"]] == [1, 3, 4]
    assert series["readings"][-1] == {
        "event_time": 4_000,
        "seq": 4,
        "temperature_c": 24.0,
        "humidity_pct": 45.0,
        "battery_v": 3.9,
    }
    other = view.series("sensor-000001", None)
    assert other is not None and other["site"] == "Lake Amy" and len(other["readings"]) == 1
    assert view.series("sensor-000009", RUN) is None

    fleet = view.fleet(RUN, [])
    assert [r["run"] for r in fleet["runs"]] == [OTHER, RUN]
    (device,) = fleet["devices"]
    assert device["last"]["seq"] == 4 and (device["x"], device["y"]) == site_position(
        "Port Jennifer"
    )


def test_view_bounds_devices_and_counts_malformed() -> None:
    view = SensorView(max_devices=2)
    for i in range(3):
        view.add(reading(f"sensor-00000{i}", 0, 0))
    assert view.stats()["devices"] == 2 and view.stats()["evicted"] == 1
    assert [d["sensor_id"] for d in view.fleet(RUN, [])["devices"]] == [
        "sensor-000001",
        "sensor-000002",
    ]
    view.add_raw(b"{not json", None, 0)
    view.add_raw(orjson.dumps({**reading("s", 0, 0), "schema": "vehicle.telemetry/1"}), None, 0)
    view.add_raw(orjson.dumps({**reading("s", 0, 0), "seq": "1"}), None, 0)
    assert view.malformed == 3 and view.readings == 3
    with pytest.raises(ValueError):
        SensorView(history_len=0)


def test_site_positions_are_fixed_and_spread() -> None:
    names = [f"Site {i}" for i in range(200)]
    places = {site_position(n) for n in names}
    assert len(places) == 200
    assert all(0 <= x < 100 and 0 <= y < 100 for x, y in places)
    assert min(x for x, _ in places) < 20 and max(x for x, _ in places) > 80


def test_run_alerts_pick_the_runs_sensor_alerts() -> None:
    view = SensorView()
    view.add(reading("sensor-000001", 0, 0))
    rows = [
        alert("a1", "sensor-000001", "spike"),
        alert("a1", "sensor-000001", "spike"),  # a replay
        alert("a2", "sensor-000002", "stuck_sensor", run=OTHER),
        alert("a3", "veh-000001", "overheating", job="vehicles"),
        alert("a4", "sensor-000001", "silent_device", event_ids=[]),
        alert("a5", "sensor-000404", "silent_device", event_ids=[]),  # not a device of RUN
        alert("a6", "sensor-000001", "low_battery", job="other"),
    ]
    mine = run_alerts(rows, RUN, view.has_device)
    assert [a["alert_id"] for a in mine] == ["a1", "a4", "a6"]
    assert run_alerts(rows, None, view.has_device) == []
    assert not is_sensor_alert({"label": "overheating", "job": "vehicles"})
    fleet = view.fleet(RUN, mine)
    assert fleet["devices"][0]["alerts"] == 3 and fleet["sites"][0]["alerts"] == 3


# -- routes ----------------------------------------------------------------------------------


class HandFed(Feeds):
    def start(self) -> None:
        pass


class HandFedSensors(SensorFeed):
    def start(self) -> None:
        pass


@pytest.fixture
def api() -> Iterator[tuple[TestClient, Feeds, SensorFeed]]:
    yield from panel_app()


def panel_app() -> Iterator[tuple[TestClient, Feeds, SensorFeed]]:
    """The app over hand-fed feeds (the panel's and the sensors'), its client open."""
    stack = StackConfig.model_validate({})
    feeds, sensors = HandFed(stack, "cards.activity-unit"), HandFedSensors(stack)
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", "t"),
        publisher=MemoryPublisher(),
    )
    with TestClient(create_app(service, feed=feeds, sensors=sensors)) as http:
        yield http, feeds, sensors


def test_sensor_routes(api: tuple[TestClient, Feeds, SensorFeed]) -> None:
    http, feeds, sensors = api
    for seq in range(3):
        sensors.view.add(reading("sensor-000001", seq, 1_000 * seq))
        sensors.view.add(reading("sensor-000002", seq, 1_000 * seq, site="Lake Amy"))
    # Alerts as the job writes them (evidence a JSON string), through the alerts tail's parser.
    feeds._on_alert({**alert("al-1", "sensor-000002", "stuck_sensor"), "evidence": '{"n": 3}'})
    feeds._on_alert(alert("al-2", "sensor-000002", "spike", run=OTHER))

    fleet = SensorList.model_validate(http.get("/v1/sensors").json())
    assert fleet.run == RUN and fleet.count == 2 and fleet.source.readings == 6
    assert [(d.sensor_id, d.site, d.alerts) for d in fleet.devices] == [
        ("sensor-000001", "Port Jennifer", 0),
        ("sensor-000002", "Lake Amy", 1),
    ]
    assert {s.site: s.devices for s in fleet.sites} == {"Port Jennifer": 1, "Lake Amy": 1}
    assert http.get("/v1/sensors", params={"limit": 1}).json()["matched"] == 2
    assert http.get("/v1/sensors", params={"run": OTHER}).json()["devices"] == []

    listed = SensorAlerts.model_validate(http.get("/v1/sensors/alerts").json())
    assert [(a.alert_id, a.evidence) for a in listed.alerts] == [("al-1", {"n": 3})]

    series = SensorSeries.model_validate(
        http.get("/v1/sensors/sensor-000002/series", params={"limit": 2}).json()
    )
    assert [r.seq for r in series.readings] == [1, 2]
    assert [a.alert_id for a in series.alerts] == ["al-1"]
    assert not http.get("/v1/sensors/sensor-000001/series").json()["alerts"]

    missing = http.get("/v1/sensors/sensor-999999/series")
    assert missing.status_code == 404 and "sensor-999999" in missing.json()["detail"]
    assert http.get("/v1/sensors", params={"run": "a b"}).status_code == 422
    assert http.get("/v1/sensors/alerts", params={"limit": 0}).status_code == 422


def test_sensor_routes_without_kafka() -> None:
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", None),
        publisher=MemoryPublisher(),
    )
    with TestClient(create_app(service)) as http:
        for path in ("/v1/sensors", "/v1/sensors/alerts", "/v1/sensors/s-1/series"):
            assert http.get(path).status_code == 503, path


def test_feed_thread_keeps_a_failure_and_runs_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "RETRY_S", 0.01)
    feed, calls, again = SensorFeed(StackConfig.model_validate({})), [], threading.Event()

    def run(stop: threading.Event) -> None:
        calls.append(stop)
        if len(calls) == 1:
            raise KafkaException("broker gone")
        again.set()

    feed.tail.run = run  # type: ignore[method-assign]
    feed.start()
    assert again.wait(5.0)
    feed.stop()
    assert len(calls) == 2 and feed.error == "KafkaException: broker gone"
    assert feed.source()["error"] == "KafkaException: broker gone"
