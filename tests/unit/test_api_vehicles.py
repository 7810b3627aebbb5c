"""The vehicle feed (latest reading per vehicle, bounded histories, vehicle alerts, status) and
its read routes, with the view filled by hand: no broker."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from api.main import create_app
from api.panel.models.vehicles import VehicleList, VehicleTelemetry
from core.config import StackConfig
from live.consumers.feeds import Feeds
from live.consumers.vehicles import VehicleTail
from live.views.feeds import alert_row
from live.views.vehicles import DEFAULT_SIGNALS, SIGNALS, History, VehicleView

NOW = 1_795_000_000_000
T0 = 1_772_524_800_000  # the scenario's simulated clock


def reading(vehicle: str, seq: int, **more: Any) -> dict[str, Any]:
    return {
        "schema": "vehicle.telemetry/1",
        "event_id": f"cv-{vehicle}-{seq}",
        "vehicle_id": vehicle,
        "event_time": T0 + seq * 1000,
        "seq": seq,
        "trip_id": 10520001,
        "road_class": "motorway",
        "speed_limit_kmh": 120,
        "lat": 49.05 + seq * 0.001,
        "lon": 9.14,
        "speed_kmh": 100.0 + seq,
        "heading_deg": 135,
        "odometer_km": 66176.95,
        "rpm": 2436,
        "coolant_c": 91.2,
        "oil_pressure_kpa": 314,
        "fuel_pct": 66.8,
        "battery_v": 14.14,
        "tyre_fl_kpa": 244.8,
        "tyre_fr_kpa": 246.3,
        "tyre_rl_kpa": 231.2,
        "tyre_rr_kpa": 243.8,
        "accel_long_ms2": 0.38,
        **more,
    }


def vehicle_alert(alert_id: str, vehicle: str, detected_at: int = NOW, **more: Any) -> dict:
    record = {
        "alert_id": alert_id,
        "rule": "threshold",
        "label": "overheating",
        "entity_id": vehicle,
        "event_time": T0 + 5000,
        "event_ids": ["cv-1", "cv-2"],
        "evidence": orjson.dumps(
            {"signal": "coolant_c", "value": 118.4, "readings": 61, "above": 105.0}
        ).decode(),
        "source": "pipeline",
        "job": "vehicles",
        "detected_at": detected_at,
        **more,
    }
    row = alert_row(record)
    assert row is not None
    return row


# -- the view --------------------------------------------------------------------------------


def test_latest_reading_keeps_the_last_fix_through_a_tunnel() -> None:
    view = VehicleView()
    assert view.add(reading("veh-1", 0), NOW, emitted_at=T0 + 40)
    assert view.add(reading("veh-1", 1, lat=None, lon=None, speed_kmh=80.0), NOW + 1000)
    (row,), counts = view.vehicles(NOW + 1000, limit=10)
    assert counts == {"alerting": 0, "moving": 1, "parked": 0}
    assert row["speed_kmh"] == 80.0 and row["gps_fix"] is False
    assert (row["lat"], row["lon"]) == (49.05, 9.14)  # the fix before the tunnel
    assert row["fix_event_time"] == T0 and row["event_time"] == T0 + 1000
    assert row["tyre_min_kpa"] == 231.2 and row["road_class"] == "motorway"
    assert row["received_at"] == NOW + 1000 and row["history"] == 2


def test_duplicates_and_stragglers_are_ignored_a_restart_is_not() -> None:
    view = VehicleView(parked_after_s=30)
    for seq in (0, 1, 2):
        view.add(reading("veh-1", seq), NOW + seq)
    assert not view.add(reading("veh-1", 2), NOW + 10)  # a duplicate
    assert not view.add(reading("veh-1", 1), NOW + 20)  # a straggler of a shuffled flush
    assert view.stale == 2 and view.readings == 3
    # Silent for a minute, then seq 0 again: a new run of the same fleet.
    assert view.add(reading("veh-1", 0, speed_kmh=5.0), NOW + 60_000)
    found = view.telemetry("veh-1", NOW + 60_000, 100, ("speed_kmh",))
    assert found is not None
    assert [r["seq"] for r in found["readings"]] == [0]  # the old run's history is gone
    assert found["vehicle"]["speed_kmh"] == 5.0


def test_malformed_records_are_counted() -> None:
    view = VehicleView()
    view.add_raw(b"{nope", None, NOW)
    view.add_raw(orjson.dumps({"vehicle_id": 7, "seq": 1}), None, NOW)
    view.add_raw(orjson.dumps({"vehicle_id": "veh-1"}), None, NOW)  # no seq
    view.add_raw(orjson.dumps([1, 2]), None, NOW)
    view.add_raw(orjson.dumps(reading("veh-1", 0)), T0 + 40, NOW)
    assert view.malformed == 4 and view.readings == 1
    assert view.vehicles(NOW, 10)[0][0]["emitted_at"] == T0 + 40


def test_latest_readings_are_bounded_to_max_vehicles() -> None:
    view = VehicleView(max_vehicles=5, history_vehicles=3)
    for i in range(12):
        view.add(reading(f"veh-{i:02d}", 0), NOW + i)
    rows, counts = view.vehicles(NOW + 12, limit=100)
    assert [r["vehicle_id"] for r in rows] == [f"veh-{i:02d}" for i in range(7, 12)]
    assert sum(counts.values()) == 5
    sizes = view.sizes()
    assert sizes["vehicles"] == 5 and sizes["with_history"] <= 3


def test_history_ring_is_bounded_and_ordered() -> None:
    history = History(4, width=len(SIGNALS))
    values = __import__("array").array("d", [math.nan] * len(SIGNALS))
    for seq in range(10):
        values[0] = float(seq)
        history.add(T0 + seq, seq, NOW, values)
    rows = history.rows(10, ("speed_kmh", "coolant_c"))
    assert [r["seq"] for r in rows] == [6, 7, 8, 9] and len(history) == 4
    assert rows[-1] == {
        "event_time": T0 + 9,
        "seq": 9,
        "received_at": NOW,
        "speed_kmh": 9.0,
        "coolant_c": None,
    }
    assert [r["seq"] for r in history.rows(2, ())] == [8, 9]
    assert history.nbytes() == 4 * len(SIGNALS) * 8 + 3 * 4 * 8


def test_history_slots_go_to_the_first_vehicles_then_to_ones_that_fell_silent() -> None:
    view = VehicleView(history_vehicles=2, history_len=3, parked_after_s=30)
    for seq in range(5):
        for vehicle in ("veh-a", "veh-b", "veh-c"):
            view.add(reading(vehicle, seq), NOW + seq * 1000)
    tracked = {v: view.telemetry(v, NOW, 10, ("speed_kmh",)) for v in ("veh-a", "veh-b", "veh-c")}
    assert [len(t["readings"]) for t in tracked.values() if t] == [3, 3, 0]  # bounded to 3 each
    assert tracked["veh-c"] and tracked["veh-c"]["tracked"] is False
    # veh-a parks (nothing for 30 s); veh-c takes its slot, veh-b keeps its own.
    later = NOW + 40_000
    view.add(reading("veh-b", 10), later)
    view.add(reading("veh-c", 10), later)
    assert view.telemetry("veh-c", later, 10, ())["tracked"] is True  # type: ignore[index]
    assert view.telemetry("veh-a", later, 10, ())["tracked"] is False  # type: ignore[index]
    assert view.telemetry("veh-b", later, 10, ())["tracked"] is True  # type: ignore[index]
    assert view.sizes()["with_history"] == 2


def test_an_alert_or_a_request_pins_a_vehicle_to_a_history_slot() -> None:
    view = VehicleView(history_vehicles=2, history_len=50)
    for seq in range(3):
        for vehicle in ("veh-a", "veh-b", "veh-c", "veh-d"):
            view.add(reading(vehicle, seq), NOW + seq)
    assert view.add_alert(vehicle_alert("al-1", "veh-c"), NOW + 5)
    assert not view.add_alert(vehicle_alert("al-1", "veh-c"), NOW + 6)  # a replay
    view.add(reading("veh-c", 3), NOW + 7)
    view.want("veh-d", NOW + 8)
    view.want("veh-unknown", NOW + 8)  # never seen: nothing to pin
    view.add(reading("veh-d", 3), NOW + 9)
    for seq in range(4, 8):  # busy unpinned vehicles cannot take the pinned slots
        for vehicle in ("veh-a", "veh-b"):
            view.add(reading(vehicle, seq), NOW + 10 + seq)
    found_c = view.telemetry("veh-c", NOW + 20, 10, ("coolant_c",))
    found_d = view.telemetry("veh-d", NOW + 20, 10, ("coolant_c",))
    assert found_c and found_c["tracked"] and [r["seq"] for r in found_c["readings"]] == [3]
    assert found_d and found_d["tracked"] and [r["seq"] for r in found_d["readings"]] == [3]
    assert view.sizes()["pinned"] == 1  # at most half of the slots: veh-c's pin went first
    (alert,) = found_c["alerts"]
    assert alert["evidence"]["value"] == 118.4 and found_c["vehicle"]["status"] == "alerting"


def test_status_moving_parked_alerting() -> None:
    view = VehicleView(parked_after_s=30, alerting_for_s=600)
    view.add(reading("veh-moving", 0), NOW)
    view.add(reading("veh-parked", 0), NOW - 31_000)
    view.add(reading("veh-alert", 0), NOW - 31_000)
    view.add_alert(vehicle_alert("al-1", "veh-alert", detected_at=NOW - 60_000), NOW)
    view.add_alert(vehicle_alert("al-2", "veh-only-alert", detected_at=NOW - 1000), NOW)
    view.add_alert(vehicle_alert("al-3", "veh-old", detected_at=NOW - 700_000), NOW)
    assert not view.add_alert({**vehicle_alert("c1", "tok_x"), "job": "cards",
                               "label": "card_testing"})  # fmt: skip
    rows, counts = view.vehicles(NOW, limit=100)
    assert [(r["vehicle_id"], r["status"]) for r in rows] == [
        ("veh-alert", "alerting"),
        ("veh-only-alert", "alerting"),
        ("veh-moving", "moving"),
        ("veh-old", "parked"),
        ("veh-parked", "parked"),
    ]
    assert counts == {"alerting": 2, "moving": 1, "parked": 2}
    assert rows[0]["last_alert"]["alert_id"] == "al-1" and rows[0]["alerts"] == 1
    assert rows[1]["lat"] is None and rows[1]["silent_s"] is None
    only, _ = view.vehicles(NOW, limit=100, status="parked")
    assert [r["vehicle_id"] for r in only] == ["veh-old", "veh-parked"]
    assert len(view.vehicles(NOW, limit=2)[0]) == 2


def test_alerts_per_vehicle_are_bounded() -> None:
    view = VehicleView(alerts_per_vehicle=3)
    for i in range(10):
        view.add_alert(vehicle_alert(f"al-{i}", "veh-1", detected_at=NOW + i), NOW + i)
    found = view.telemetry("veh-1", NOW + 10, 10, ())
    assert found is not None
    assert [a["alert_id"] for a in found["alerts"]] == ["al-9", "al-8", "al-7"]


def test_the_read_budget() -> None:
    tail = VehicleTail(
        StackConfig.model_validate({}), "t", VehicleView(), read_cap_per_s=5000, cycle_s=0.5
    )
    assert tail.budget() == 2500
    config = tail.consumer  # a real librdkafka consumer accepts the small prefetch settings
    config().close()
    assert tail.sampling()["records_skipped"] == 0


# -- routes ----------------------------------------------------------------------------------


class HandFed(Feeds):
    def start(self) -> None:
        pass


@pytest.fixture
def api() -> Iterator[tuple[TestClient, Feeds]]:
    feeds = HandFed(StackConfig.model_validate({}), "cards.activity-unit")
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", "t"),
        publisher=MemoryPublisher(),
    )
    with TestClient(create_app(service, feed=feeds)) as http:
        yield http, feeds


def test_vehicle_routes(api: tuple[TestClient, Feeds]) -> None:
    http, feeds = api
    now = __import__("time").time_ns() // 1_000_000
    for seq in range(5):
        feeds.vehicles.add(reading("veh-000001", seq, coolant_c=100.0 + seq), now)
        feeds.vehicles.add(reading("veh-000002", seq), now)
    # An alert as the vehicle job writes it, through the alerts tail's parser.
    feeds._on_alert(
        {**vehicle_alert("al-1", "veh-000002", detected_at=now), "evidence": '{"value": 118.4}'}
    )

    listed = VehicleList.model_validate(http.get("/v1/vehicles").json())
    assert [(v.vehicle_id, v.status) for v in listed.vehicles] == [
        ("veh-000002", "alerting"),
        ("veh-000001", "moving"),
    ]
    assert listed.counts == {"alerting": 1, "moving": 1, "parked": 0}
    assert listed.vehicles[0].last_alert and listed.vehicles[0].last_alert.evidence == {
        "value": 118.4
    }
    assert listed.source.topic == "vehicles.telemetry"
    assert listed.bounds.history_len == 300 and listed.sampling.readings == 10
    assert http.get("/v1/vehicles?status=moving").json()["count"] == 1
    assert http.get("/v1/vehicles?status=lost").status_code == 422
    assert http.get("/v1/vehicles?limit=0").status_code == 422

    body = http.get("/v1/vehicles/veh-000001/telemetry?signal=coolant_c&limit=3").json()
    telemetry = VehicleTelemetry.model_validate(body)
    assert telemetry.signals == ["coolant_c"] and telemetry.tracked
    assert [r["coolant_c"] for r in body["readings"]] == [102.0, 103.0, 104.0]
    assert set(body["readings"][0]) == {"event_time", "seq", "received_at", "coolant_c"}

    default = http.get("/v1/vehicles/veh-000002/telemetry").json()
    assert default["signals"] == list(DEFAULT_SIGNALS) and len(default["readings"]) == 5
    assert default["alerts"][0]["alert_id"] == "al-1"

    bad = http.get("/v1/vehicles/veh-000001/telemetry?signal=warp_factor")
    assert bad.status_code == 422 and "coolant_c" in bad.text
    missing = http.get("/v1/vehicles/veh-999999/telemetry")
    assert missing.status_code == 404 and "veh-999999" in missing.json()["detail"]

    paths = http.get("/openapi.json").json()["paths"]
    for path in ("/v1/vehicles", "/v1/vehicles/{vehicle_id}/telemetry"):
        assert "schema" in paths[path]["get"]["responses"]["200"]["content"]["application/json"]


def test_vehicle_routes_without_kafka() -> None:
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", None),
        publisher=MemoryPublisher(),
    )
    with TestClient(create_app(service)) as http:
        assert http.get("/v1/vehicles").status_code == 503
        assert http.get("/v1/vehicles/veh-1/telemetry").status_code == 503
