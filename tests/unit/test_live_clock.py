"""The fleet's estimated clock offsets as the panel reads them (`live.views.clock`, from the
compacted `<domain>.clock-offsets` topics) and their read routes, the table filled by hand: no
broker."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from api.panel.models.clock import ClockHistogram
from api.panel.models.sensors import SensorList, SensorSeries
from api.panel.models.vehicles import VehicleList, VehicleTelemetry
from live.consumers.feeds import Feeds
from live.consumers.sensors import SensorFeed
from live.views.clock import MAX_BINS, OffsetTable, offset_row
from tests.unit.test_api_sensors import RUN, panel_app
from tests.unit.test_api_sensors import reading as sensor_reading
from tests.unit.test_api_vehicles import reading as vehicle_reading

T0 = 1_772_524_800_000


def row(device: str, ms: int, as_of: int, reset: bool = False) -> dict[str, Any]:
    return {
        "device_id": device,
        "offset_estimate_ms": ms,
        "reset": reset,
        "records": 30,
        "as_of": as_of,
    }


def current(table: OffsetTable, device: str) -> dict[str, Any]:
    found = table.offset(device)
    assert found is not None, device
    return found


def test_the_latest_estimate_per_device_and_regime_wins() -> None:
    table = OffsetTable()
    for value in [
        row("cv-1", 1_000, T0 + 30_000),
        row("cv-1", 1_200, T0 + 60_000),
        row("cv-1", 900, T0 + 45_000),  # an older window's row read after a newer one
    ]:
        table.add_raw(orjson.dumps(value))
    assert current(table, "cv-1")["offset_estimate_ms"] == 1_200
    # a reset clock is its own regime: the device's current row is the newest of the two
    table.add(row("cv-1", 830_000_000_000, T0 + 90_000, reset=True))
    assert current(table, "cv-1")["reset"] is True
    table.add(row("cv-1", 1_300, T0 + 120_000))  # the clock has its fix again
    assert current(table, "cv-1")["offset_estimate_ms"] == 1_300
    assert table.offset("cv-2") is None
    table.add_raw(b'{"device_id": "cv-3"}')  # no offset: not a row
    table.add_raw(b"not json")
    table.add_raw(None)  # a tombstone: not counted
    assert table.stats() == {"devices": 1, "records": 5, "malformed": 2}
    assert offset_row({"device_id": "", "offset_estimate_ms": 1, "as_of": 1}) is None


def test_the_histogram_counts_running_clocks_and_sets_resets_apart() -> None:
    table = OffsetTable()
    offsets = {"a": -61_000, "b": -1_000, "c": 2_000, "d": 4_900, "e": 119_000}
    for device, ms in offsets.items():
        table.add(row(device, ms, T0))
    table.add(row("e", 830_000_000_000, T0 + 1, reset=True))  # e's clock is reset now
    body = table.histogram(30.0)
    assert body["devices"] == 4 and body["in_reset"] == 1
    assert [(b["low_s"], b["devices"]) for b in body["bins"]] == [
        (-90.0, 1),
        (-60.0, 0),
        (-30.0, 1),
        (0.0, 2),
    ]
    assert body["p50_ms"] == 2_000 and body["max_abs_ms"] == 61_000
    assert sum(b["devices"] for b in table.histogram(1.0)["bins"]) == 4
    # a spread too wide for the bin width widens the bins, not the list
    table.add(row("f", 86_000_000, T0))
    wide = table.histogram(1.0)
    assert len(wide["bins"]) <= MAX_BINS and wide["bin_s"] > 1.0
    assert sum(b["devices"] for b in wide["bins"]) == 5
    assert OffsetTable().histogram()["bins"] == []


# -- routes ----------------------------------------------------------------------------------


@pytest.fixture
def api() -> Iterator[tuple[TestClient, Feeds, SensorFeed]]:
    yield from panel_app()


def test_vehicle_routes_carry_each_vehicles_offset_and_the_fleets(
    api: tuple[TestClient, Feeds, SensorFeed],
) -> None:
    http, feeds, _ = api
    now = time.time_ns() // 1_000_000
    for seq in range(3):
        feeds.vehicles.add(vehicle_reading("veh-000001", seq), now)
        feeds.vehicles.add(vehicle_reading("veh-000002", seq), now)
    empty = ClockHistogram.model_validate(http.get("/v1/vehicles/clock-offsets").json())
    assert empty.devices == 0 and empty.source.topic == "vehicles.clock-offsets"
    feeds.vehicle_clock.table.add(row("veh-000001", -42_300, T0))
    feeds.vehicle_clock.table.add(row("veh-000009", 3_000, T0))  # no reading of it kept

    listed = VehicleList.model_validate(http.get("/v1/vehicles").json())
    assert {v.vehicle_id: v.offset_estimate_ms for v in listed.vehicles} == {
        "veh-000001": -42_300,
        "veh-000002": None,
    }
    one = VehicleTelemetry.model_validate(http.get("/v1/vehicles/veh-000001/telemetry").json())
    assert one.clock is not None and one.clock.offset_estimate_ms == -42_300
    assert one.vehicle.offset_estimate_ms == -42_300
    other = http.get("/v1/vehicles/veh-000002/telemetry").json()
    assert other["clock"] is None

    fleet = ClockHistogram.model_validate(
        http.get("/v1/vehicles/clock-offsets", params={"bin_s": 10}).json()
    )
    assert fleet.devices == 2 and fleet.bin_s == 10.0
    assert (fleet.bins[0].low_s, fleet.bins[0].devices) == (-50.0, 1)
    assert http.get("/v1/vehicles/clock-offsets", params={"bin_s": 0}).status_code == 422


def test_sensor_routes_carry_each_sensors_offset_and_the_fleets(
    api: tuple[TestClient, Feeds, SensorFeed],
) -> None:
    http, _, sensors = api
    for seq in range(3):
        sensors.view.add(sensor_reading("sensor-000001", seq, 1_000 * seq))
    sensors.clock.table.add(row("sensor-000001", 7_500, T0))
    fleet = SensorList.model_validate(http.get("/v1/sensors").json())
    assert fleet.run == RUN and [d.offset_estimate_ms for d in fleet.devices] == [7_500]
    series = SensorSeries.model_validate(http.get("/v1/sensors/sensor-000001/series").json())
    assert series.clock is not None and series.clock.offset_estimate_ms == 7_500
    body = ClockHistogram.model_validate(http.get("/v1/sensors/clock-offsets").json())
    assert body.devices == 1 and body.source.topic == "sensors.clock-offsets"
    paths = http.get("/openapi.json").json()["paths"]
    for path in ("/v1/vehicles/clock-offsets", "/v1/sensors/clock-offsets"):
        assert "schema" in paths[path]["get"]["responses"]["200"]["content"]["application/json"]
