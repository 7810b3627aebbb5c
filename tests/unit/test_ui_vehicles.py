"""The Vehicles page rendered by Streamlit's AppTest against a canned API (httpx mock
transport) and against an API that is down; plus the page's pure helpers."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pandas as pd
import yaml
from streamlit.testing.v1 import AppTest

from runs.tunable import TunableKeys
from scenarios.catalog import ScenarioConfig
from tests.conftest import REPO_ROOT, free_port
from tests.unit.test_ui_pages import page_script, texts
from ui.client import ApiClient
from ui.sections import vehicles
from ui.view import fmt_duration

NOW = 1_795_000_000_000
T0 = 1_772_524_800_000  # the scenario's simulated clock
WALL_LAG_S = (NOW - T0) / 1000  # wall clock against the simulated clock: 260 days
SOURCE = {"topic": "vehicles.telemetry", "status": "live", "partitions": 3, "error": None}
ALERT = {
    "alert_id": "al-1",
    "rule": "threshold",
    "label": "overheating",
    "entity_id": "veh-000007",
    "event_time": T0 + 40_000,
    "event_ids": ["cv-1", "cv-2"],
    "evidence": {"signal": "coolant_c", "value": 118.4, "readings": 61, "above": 105.0},
    "source": "pipeline",
    "job": "vehicles",
    "detected_at": NOW,
}


def vehicle(vid: str, status: str, lat: float | None, **more: Any) -> dict[str, Any]:
    return {
        "vehicle_id": vid,
        "status": status,
        "seq": 60,
        "event_time": T0 + 60_000,
        "emitted_at": T0 + 60_040,
        "received_at": NOW,
        "silent_s": 0.5,
        "trip_id": 80_001,
        "road_class": "motorway",
        "speed_limit_kmh": 120.0,
        "speed_kmh": 112.0,
        "heading_deg": 90.0,
        "accel_long_ms2": 0.1,
        "coolant_c": 91.0,
        "battery_v": 14.1,
        "fuel_pct": 60.0,
        "tyre_min_kpa": 240.0,
        "lat": lat,
        "lon": None if lat is None else 9.0,
        "gps_fix": lat is not None,
        "fix_event_time": T0,
        "last_alert": None,
        "alerts": 0,
        "history": 60,
        **more,
    }


VEHICLES = [
    vehicle("veh-000007", "alerting", 50.1, last_alert=ALERT, alerts=1),
    vehicle("veh-000001", "moving", 52.5),
    vehicle("veh-000002", "moving", 48.1),
    vehicle("veh-000003", "parked", None),
]


def readings(n: int = 60) -> list[dict[str, Any]]:
    return [
        {
            "event_time": T0 + i * 1000,
            "seq": i,
            "received_at": NOW,
            "speed_kmh": 100.0 + i % 7,
            "speed_limit_kmh": 120.0,
            "coolant_c": 90.0 + i / 2,
            "battery_v": 14.1,
            "tyre_fl_kpa": 240.0,
            "tyre_fr_kpa": 241.0,
            "tyre_rl_kpa": 239.0,
            "tyre_rr_kpa": None,
            "accel_long_ms2": 0.2,
        }
        for i in range(n)
    ]


def vehicles_scenario() -> dict[str, Any]:
    path = REPO_ROOT / "config/scenarios/vehicles.yaml"
    return ScenarioConfig.model_validate(yaml.safe_load(path.read_text())).model_dump(mode="json")


#: What `/v1/vehicles/{id}/telemetry` says of a vehicle's clock, and the fleet's histogram.
CLOCK = {
    "device_id": "veh-000007",
    "offset_estimate_ms": -42_300,
    "reset": False,
    "records": 31,
    "as_of": T0 + 60_000,
}
CLOCK_OFFSETS = {
    "bins": [
        {"low_s": -45.0, "high_s": -40.0, "devices": 1},
        {"low_s": -40.0, "high_s": -35.0, "devices": 0},
        {"low_s": -35.0, "high_s": -30.0, "devices": 2},
    ],
    "bin_s": 5.0,
    "devices": 3,
    "in_reset": 1,
    "p50_ms": -33_000,
    "max_abs_ms": 42_300,
    "source": {
        "topic": "vehicles.clock-offsets",
        "status": "live",
        "partitions": 1,
        "error": None,
        "devices": 4,
        "records": 40,
        "malformed": 0,
    },
}


def canned(
    requests: list[httpx.Request], *, alerts: bool = True
) -> Callable[[httpx.Request], httpx.Response]:
    fleet = VEHICLES if alerts else VEHICLES[1:]
    counts = {s: sum(v["status"] == s for v in fleet) for s in ("alerting", "moving", "parked")}
    routes: dict[tuple[str, str], Any] = {
        ("GET", "/v1/scenarios"): {
            "scenarios": [
                {
                    "name": "vehicles",
                    "file": "config/scenarios/vehicles.yaml",
                    "config": vehicles_scenario(),
                    "error": None,
                    "tunable": TunableKeys.of(vehicles_scenario()).dotted(),
                }
            ]
        },
        ("GET", "/v1/runs"): {
            "runs": [
                {
                    "run_id": "vehicles-1",
                    "scenario": "vehicles",
                    "status": "running",
                    "pid": 42,
                    "speed": 5.0,
                    "duration_s": 600.0,
                    "started_at": NOW - 60_000,
                    "ended_at": None,
                    "overrides": {"entities": 50},
                    "summary": None,
                    "error": None,
                }
            ]
        },
        ("POST", "/v1/control/runs"): {
            "run_id": "vehicles-2",
            "pid": 43,
            "status": "running",
        },
        ("GET", "/v1/vehicles"): {
            "vehicles": fleet,
            "count": len(fleet),
            "counts": counts,
            "bounds": {},
            "sampling": {
                "read_cap_per_s": 5000,
                "records_read": 12_345,
                "records_skipped": 0,
                "skips": 0,
                "last_skip_at": None,
                "readings": 12_000,
                "stale": 3,
                "malformed": 0,
            },
            "source": SOURCE,
        },
        ("GET", "/v1/rates"): {
            "sampled_at": NOW,
            "interval_s": 1.0,
            "topics": [{"topic": "vehicles.telemetry", "records_per_s": 48.0, "end_offset": 9000}],
            "history": [],
            "error": None,
        },
        ("GET", "/v1/pipeline"): {
            "queries": [
                {
                    "query": "vehicle-alerts",
                    "job": "vehicles",
                    "mode": "microbatch",
                    "processed_rows_per_s": 950.0,
                    "watermark_ms": T0,
                    "watermark_delay_s": WALL_LAG_S,
                    "watermark_behind_newest_s": 12.5,
                    "offsets_behind": 4321,
                    "dropped_by_watermark_seen": 30,
                    "late_events_seen": 17,
                },
                {
                    "query": "card-alerts",
                    "job": "cards",
                    "mode": "realtime",
                    "processed_rows_per_s": 5.0,
                    "watermark_delay_s": 900.0,
                    "dropped_by_watermark_seen": 1000,
                    "late_events_seen": 1000,
                },
            ],
            "jobs": [
                {
                    "job": "cards",
                    "queries": 1,
                    "modes": ["realtime"],
                    "input_rows_per_s": 5.0,
                    "processed_rows_per_s": 5.0,
                    "watermark_delay_s": 900.0,
                    "late_events_seen": 1000,
                },
                {
                    "job": "vehicles",
                    "queries": 1,
                    "modes": ["microbatch"],
                    "input_rows_per_s": 40.0,
                    "processed_rows_per_s": 950.0,
                    "watermark_delay_s": WALL_LAG_S,
                    "watermark_behind_newest_s": 12.5,
                    "offsets_behind": 4321,
                    "late_events_seen": 17,
                },
            ],
            "source": SOURCE,
        },
        ("GET", "/v1/vehicles/clock-offsets"): CLOCK_OFFSETS,
    }

    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        path = request.url.path
        if path.startswith("/v1/vehicles/") and path.endswith("/telemetry"):
            vid = path.split("/")[3]
            known = {v["vehicle_id"]: v for v in fleet}
            if vid not in known:
                return httpx.Response(404, json={"detail": f"no reading or alert of {vid}"})
            return httpx.Response(
                200,
                json={
                    "vehicle_id": vid,
                    "vehicle": known[vid],
                    "signals": ["speed_kmh", "coolant_c"],
                    "readings": readings(),
                    "alerts": [ALERT] if vid == "veh-000007" else [],
                    "tracked": True,
                    "history_len": 300,
                    "clock": CLOCK if vid == "veh-000007" else None,
                },
            )
        body = routes.get((request.method, path))
        if body is None:
            return httpx.Response(404, json={"detail": "not here"})
        return httpx.Response(200, json=body)

    return handle


def app(client: ApiClient, **query: str) -> AppTest:
    test = AppTest.from_function(page_script, args=("vehicles", client), default_timeout=30)
    for key, value in query.items():
        test.query_params[key] = value
    test.run()
    assert not test.exception, test.exception
    return test


def fake_api(**kwargs: Any) -> tuple[ApiClient, list[httpx.Request]]:
    requests: list[httpx.Request] = []
    client = ApiClient(
        "http://api", token="t0k", transport=httpx.MockTransport(canned(requests, **kwargs))
    )
    return client, requests


def charts(test: AppTest) -> list[Any]:
    return list(test.get("arrow_vega_lite_chart")) or list(test.get("vega_lite_chart"))


# -- the page --------------------------------------------------------------------------------


def test_page_says_when_the_api_is_down() -> None:
    test = app(ApiClient(f"http://127.0.0.1:{free_port()}", token="t", timeout_s=2))
    errors = [e.value for e in test.error]
    assert errors and all("not reachable" in e and "streamsim api" in e for e in errors), errors
    assert len(errors) >= 3  # scenarios, figures, map, telemetry: each says so, none crashes


def test_page_shows_the_fleet_the_alert_and_the_alerting_vehicles_charts() -> None:
    client, requests = fake_api()
    test = app(client)
    shown = texts(test)
    metrics = {m.label: m.value for m in test.metric}
    assert metrics["Vehicles seen"] == "4" and metrics["Alerting"] == "1"
    assert metrics["Moving"] == "2" and metrics["Parked"] == "1"
    assert metrics["Telemetry (topic)"] == "48.0/s"
    assert metrics["vehicles rows/s"] == "950/s"  # the card job's queries left out
    assert metrics["Late events dropped (seen)"] == "17"  # counted once, not 30
    # Lag on the run's simulated clock and in records, not wall clock against event time.
    assert metrics["Watermark behind newest reading"] == "12.5 s"
    assert metrics["Behind the topic's end"] == "4,321"
    assert not any("days" in str(value) for value in metrics.values()), metrics
    (table,) = test.table
    row = table.value.loc["vehicle-alerts"]
    assert row["watermark behind newest"] == "12.5 s"
    assert row["behind topic end (records)"] == "4,321"
    assert "watermark behind (s)" not in table.value.columns
    # The map: one deck, vehicles with a fix, the alerting one ringed and labelled.
    (deck,) = test.get("deck_gl_json_chart")
    spec = json.loads(deck.proto.json)
    layers = {layer["id"]: layer for layer in spec["layers"]}
    assert [p["vehicle_id"] for p in layers["alert-rings"]["data"]] == ["veh-000007"]
    assert layers["alert-labels"]["data"][0]["alert"] == "! overheating"
    assert len(layers["vehicles"]["data"]) == 3  # veh-000003 has no fix yet
    assert "carto" not in deck.proto.json
    assert "4 vehicles (3 with a position)" in shown
    # The alert with its evidence, and the alerting vehicle charted by default.
    assert "**overheating** · `veh-000007`" in shown
    assert "value: 118.4" in shown and "above: 105" in shown
    assert test.selectbox(key=vehicles.PICK_KEY).value == "veh-000007"
    assert "**Telemetry of `veh-000007`**" in shown
    # its charts and the fleet's clock-offset histogram; its estimated offset beside them
    assert len(charts(test)) == len(vehicles.PANELS) + 1
    assert "Clock offset -42.3 s (its clock runs behind; estimated over 31 records" in shown
    assert "3 vehicles · median -33.0 s · largest ±42.3 s · 1 with a clock reset" in shown
    assert "60 recent readings" in shown
    asked = [r for r in requests if r.url.path.endswith("/telemetry")]
    assert asked and asked[-1].url.path == "/v1/vehicles/veh-000007/telemetry"
    # The scenario: its run with a Stop button, the runs page's sliders to start another.
    assert "run `vehicles-1` **running**" in shown
    assert [b.label for b in test.button if b.label == "Stop"] == ["Stop"]
    assert test.select_slider(key="knob:vehicles:entities").value == 2000


def test_page_starts_a_run_with_the_moved_sliders() -> None:
    client, requests = fake_api()
    test = app(client)
    test.select_slider(key="knob:vehicles:entities").set_value(50)
    test.select_slider(key="knob:vehicles:speed").set_value(5.0)
    next(b for b in test.button if b.label == "Start run").click().run()
    assert not test.exception
    (post,) = [r for r in requests if r.method == "POST"]
    body = json.loads(post.content)
    assert body["scenario"] == "vehicles" and body["overrides"] == {"entities": 50}
    assert body["speed"] == 5.0 and post.headers["authorization"] == "Bearer t0k"
    assert "Started run `vehicles-2` (pid 43)." in texts(test)


def test_picking_a_vehicle_charts_it_and_the_url_can_name_one() -> None:
    client, _ = fake_api()
    test = app(client)
    test.selectbox(key=vehicles.PICK_KEY).set_value("veh-000002").run()
    assert not test.exception
    assert "**Telemetry of `veh-000002`**" in texts(test)
    assert "No alert of this vehicle." in texts(test)
    named = app(fake_api()[0], vehicle="veh-000001")
    assert "**Telemetry of `veh-000001`**" in texts(named)
    unknown = app(fake_api()[0], vehicle="veh-424242")
    assert "Nothing of `veh-424242` seen by the API (yet)." in texts(unknown)


def test_without_alerts_the_first_moving_vehicle_is_charted() -> None:
    client, _ = fake_api(alerts=False)
    test = app(client)
    assert test.selectbox(key=vehicles.PICK_KEY).value == "veh-000001"
    assert "None yet: the `vehicles` job writes them" in texts(test)


# -- helpers ---------------------------------------------------------------------------------


def test_map_points_fit_and_cities() -> None:
    points = vehicles.map_points(VEHICLES)
    assert [p["vehicle_id"] for p in points][-1] == "veh-000007"  # drawn last, on top
    assert points[-1]["color"] == vehicles.COLORS["alerting"]
    lon, lat, zoom = vehicles.fit(points)
    assert 8.9 < lon < 9.1 and 48 < lat < 53 and 5 < zoom < 8
    names = [c["name"] for c in vehicles.cities_near(lon, lat, zoom)]
    assert "Frankfurt am Main" in names or "Stuttgart" in names
    assert vehicles.fit([]) == vehicles.fit([])  # Germany when there is nothing to fit
    assert vehicles.graticule(lon, lat, zoom)
    deck = vehicles.deck(VEHICLES, selected="veh-000001").to_json()
    assert "OrthographicView" in deck and '"selected"' in deck


def test_telemetry_frame_leaves_out_clock_resets_and_marks_alerts_in_the_window() -> None:
    rows = readings(10)
    rows[3] = {**rows[3], "event_time": 946_684_800_000}  # reset to 2000-01-01
    frame, reset = vehicles.telemetry_frame(rows)
    assert reset == 1 and frame["time"].min() >= pd.Timestamp("2026-01-01")
    assert set(frame["signal"]) >= {"speed_kmh", "coolant_c", "tyre_fl_kpa"}
    assert "tyre_rr_kpa" not in set(frame["signal"])  # all null
    inside = {**ALERT, "event_time": T0 + 5000}
    far = {**ALERT, "alert_id": "al-2", "event_time": T0 + 3_600_000}
    marks, outside = vehicles.alert_marks([inside, far], frame)
    assert list(marks["alert"]) == ["overheating (threshold)"] and outside == 1
    chart = vehicles.panel_chart(frame, marks, "Coolant", "°C").to_dict()
    assert len(chart["layer"]) == 3  # lines, alert rules, alert labels
    assert vehicles.telemetry_frame([])[0].empty


def test_durations() -> None:
    assert fmt_duration(12.46) == "12.5 s"
    assert fmt_duration(600) == "10.0 min"
    assert fmt_duration(3 * 3600) == "3.0 h"
    assert fmt_duration(22_706_140) == "262.8 days"
    assert fmt_duration(None) == "—"


def test_default_vehicle_and_job_filters() -> None:
    assert vehicles.default_vehicle(VEHICLES) == "veh-000007"
    assert vehicles.default_vehicle(VEHICLES[1:]) == "veh-000001"
    assert vehicles.default_vehicle([]) is None
    assert vehicles.topic_rate({"topics": []}) is None
    queries = [{"job": "vehicles", "query": "a"}, {"job": "cards", "query": "b"}]
    assert [q["query"] for q in vehicles.job_queries(queries)] == ["a"]
