"""The Shipping page's open routes without Kafka: the fleet view (tracks in event-time order
whatever order positions land in, port calls and ships in dock, boxes aboard, the backlog held
on board from event to emit time, the estimate while at sea), nothing of an owner in it, and
the routes (`/v1/shipping/fleet` with sea lanes and placed ports, `/v1/shipping/alerts` with
the shipping alerts only)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.panel.models.ships import Fleet
from api.panel.routes.ships import lane
from core.config import StackConfig
from live.views.feeds import RingBuffer, alert_row
from live.views.shipping import CONTAINERS_TOPIC, PORT_EVENTS_TOPIC
from live.views.ships import HOUR_MS, POSITIONS_TOPIC, ShipsView, thin
from tests.unit.test_api_shipping import BOX_A, BOX_B, A, HandFed, port_event, reading, service

SHIP = "IMO9747455"
T0 = 1_772_409_600_000  # 2026-03-02


def position(t: int, lat: float, lon: float, **more: Any) -> dict[str, Any]:
    return {
        "schema": "shipping.position/1",
        "event_id": f"sh-00000001-pos{t}",
        "ship_id": SHIP,
        "event_time": t,
        "seq": t // 1000,
        "voyage_id": 1,
        "lat": lat,
        "lon": lon,
        "sog_kn": 18.5,
        "cog_deg": 290.0,
        "nav_status": "under_way",
        "dest_port": "NLRTM",
        "channel": "onboard",
        **more,
    }


def call(kind: str, t: int, port: str = "SGSIN") -> dict[str, Any]:
    """A ship's arrival or departure: a port event naming no box."""
    return {**port_event(BOX_A, A, kind, t, port=port), "container_id": None, "owner": None}


def feed(view: ShipsView, topic: str, record: dict[str, Any], emitted_at: int) -> None:
    view.add_raw(topic, orjson.dumps(record), emitted_at)


def voyage() -> ShipsView:
    """A ship loads a box at Singapore (another stays in the yard), leaves, logs 10 h at sea
    (held until the upload at hour 10), and a satellite alarm goes live at hour 5."""
    view = ShipsView()
    feed(view, PORT_EVENTS_TOPIC, port_event(BOX_A, A, "loaded", T0 - HOUR_MS), T0 - HOUR_MS)
    feed(view, PORT_EVENTS_TOPIC, port_event(BOX_B, "duckworks", "loaded", T0), T0)
    feed(view, PORT_EVENTS_TOPIC, port_event(BOX_B, "duckworks", "unloaded", T0), T0)
    feed(view, PORT_EVENTS_TOPIC, port_event(BOX_A, A, "loaded", T0), T0)
    feed(view, PORT_EVENTS_TOPIC, call("departure", T0), T0)
    upload = T0 + 10 * HOUR_MS
    alarm = reading(BOX_A, A, 99, T0 + 5 * HOUR_MS, channel="satellite", alarm="temperature")
    feed(view, CONTAINERS_TOPIC, alarm, T0 + 5 * HOUR_MS)
    in_yard = reading(BOX_B, "duckworks", 0, T0, port="SGSIN", channel="shore")
    feed(view, CONTAINERS_TOPIC, in_yard, T0)
    for h in reversed(range(10)):  # the voyage lands in bulk, newest first
        t = T0 + h * HOUR_MS
        feed(view, POSITIONS_TOPIC, position(t, 1.2 + h / 10, 103.8 - h), upload)
        feed(view, CONTAINERS_TOPIC, reading(BOX_A, A, h, t), upload)
    return view


def test_a_voyage_held_on_board_lands_in_order_and_the_backlog_is_known() -> None:
    got = voyage().fleet()
    (ship,) = got["ships"]
    assert ship["ship_id"] == SHIP and ship["status"] == "at_sea" and ship["port"] == "SGSIN"
    assert ship["position"]["event_time"] == T0 + 9 * HOUR_MS  # the newest, not the last read
    assert [p[0] for p in ship["track"]] == [103.8 - h for h in range(10)]
    assert ship["boxes_aboard"] == 1 and ship["satellite_alarms"] == 1
    thinned = thin([(t, 0.0, float(t)) for t in range(1001)])
    assert len(thinned) == 335 and thinned[-1] == [1000.0, 0.0]
    assert ship["onboard_records"] == 20 and ship["peak_held"] == 20 and ship["held_now"] == 0
    assert ship["mean_delay_h"] == 5.5 and ship["last_upload"] == T0 + 10 * HOUR_MS
    series = {p["time"]: p["held"] for p in got["backlog"]}
    assert series[T0] == 2 and series[T0 + 9 * HOUR_MS] == 20 and series[T0 + 10 * HOUR_MS] == 0
    assert got["ports"] == []  # at sea: no port has it alongside
    assert got["shore_now"] == T0 + 10 * HOUR_MS
    text = orjson.dumps(got).decode()  # open route: no box, no owner
    assert BOX_A not in text and BOX_B not in text and A not in text and "duckworks" not in text


def test_in_port_ships_are_in_dock_and_at_sea_ones_have_an_estimate() -> None:
    view = voyage()
    later = T0 + 16 * HOUR_MS  # six hours after the upload, still at sea
    feed(view, POSITIONS_TOPIC, position(later, 3.0, 95.0, channel="satellite"), later)
    (ship,) = view.fleet()["ships"]
    # 20 records over the 9 h logged: ~2.2 an hour, for 6 h since the upload
    assert ship["waiting_est"] == 13
    feed(view, PORT_EVENTS_TOPIC, call("arrival", later, "NLRTM"), later)
    got = view.fleet()
    assert got["ships"][0]["status"] == "in_port" and got["ships"][0]["waiting_est"] == 0
    assert got["ports"] == [{"port": "NLRTM", "ships_in_dock": [SHIP]}]


def test_a_rerun_with_the_same_ships_is_shown_on_its_own() -> None:
    view = voyage()
    again = {**position(T0, 1.0, 100.0), "event_id": "sh-00000002-pos"}
    feed(view, POSITIONS_TOPIC, again, T0 + HOUR_MS)
    got = view.fleet()
    assert got["run"] == "sh-00000002" and got["shore_now"] == T0 + HOUR_MS
    assert got["runs"] == [{"run": "sh-00000002", "ships": 1}, {"run": "sh-00000001", "ships": 1}]
    assert got["ships"][0]["onboard_records"] == 1 and got["ships"][0]["track"] == [[100.0, 1.0]]
    assert view.fleet(run="sh-00000001")["ships"][0]["onboard_records"] == 20
    bounded = ShipsView(max_ships=1)
    feed(bounded, POSITIONS_TOPIC, position(T0, 1.0, 100.0), T0)
    feed(bounded, POSITIONS_TOPIC, again, T0)
    assert [r["run"] for r in bounded.fleet()["runs"]] == ["sh-00000002"]


def test_malformed_records_are_counted() -> None:
    view = ShipsView()
    view.add_raw(POSITIONS_TOPIC, b"{nope", None)
    feed(view, POSITIONS_TOPIC, {"schema": "shipping.position/1", "ship_id": SHIP}, T0)
    assert view.stats()["malformed"] == 2 and view.fleet()["ships"] == []
    with pytest.raises(ValueError):
        ShipsView(track_len=1)


def test_a_lane_follows_the_sea_between_real_ports() -> None:
    path = lane("SGSIN", "NLRTM")
    assert 10 < len(path) <= 162
    assert path[0] == pytest.approx([103.8, 1.3], abs=0.5)
    assert path[-1] == pytest.approx([4.1, 51.9], abs=0.5)
    assert lane("SGSIN", "SGSIN") == lane("SGSIN", None) == lane("XXXXX", "NLRTM") == []


class Feeds:
    """The part of `live.consumers.feeds.Feeds` the alerts route reads."""

    alerts_topic = "alerts"

    def __init__(self) -> None:
        self.alerts = RingBuffer(100, key="detected_at", id_key="alert_id")

    def source(self, topic: str) -> dict[str, Any]:
        return {"topic": topic, "status": "live", "partitions": 1, "error": None}


@pytest.fixture
def http() -> Iterator[TestClient]:
    tail = HandFed(StackConfig.model_validate({}), fleet=voyage())
    app = create_app(service(), shipping=tail)
    feeds = Feeds()
    jobs = (
        ("shipping", "reefer_failure"),
        ("vehicles", "overheating"),
        (None, "door_tamper"),
    )
    for i, (job, label) in enumerate(jobs):
        record = {"alert_id": f"a{i}", "rule": "r", "label": label, "job": job, "detected_at": i}
        feeds.alerts.append(alert_row(record | {"late": True, "late_by_ms": 7}) or {})
    app.state.feeds = feeds
    with TestClient(app) as client:
        yield client


def test_the_fleet_route_is_open_and_places_lanes_and_ports(http: TestClient) -> None:
    got = http.get("/v1/shipping/fleet")
    assert got.status_code == 200, got.text
    body = Fleet.model_validate(got.json())
    (ship,) = body.ships
    assert ship.lane[0] == pytest.approx([103.8, 1.3], abs=0.5)  # SGSIN to NLRTM by sea
    assert {p.port: (p.name, p.ships_in_dock) for p in body.ports} == {
        "SGSIN": ("Singapore", []),
        "NLRTM": ("Rotterdam", []),
    }
    assert body.run == "sh-00000001" and body.runs[0].ships == 1
    assert http.get("/v1/shipping/fleet", params={"hours": 0}).status_code == 422
    assert http.get("/v1/shipping/fleet", params={"run": "sh-nope"}).json()["ships"] == []


def test_the_alerts_route_keeps_the_shipping_alerts(http: TestClient) -> None:
    got = http.get("/v1/shipping/alerts").json()
    assert [a["alert_id"] for a in got["alerts"]] == ["a2", "a0"] and got["count"] == 2
    assert got["alerts"][1]["late"] is True and got["alerts"][1]["late_by_ms"] == 7


def test_without_kafka_the_routes_say_so() -> None:
    with TestClient(create_app(service())) as client:
        for url in ("/v1/shipping/fleet", "/v1/shipping/alerts"):
            down = client.get(url)
            assert down.status_code == 503 and "Kafka" in down.json()["detail"], url
