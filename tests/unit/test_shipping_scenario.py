"""The shipping scenario in memory: determinism, voyage data held on board until the next port
(days late, in bulk), the satellite slice, topic routing by key, incidents and hard negatives.

Small fleets (a few ships, a few hundred containers) over a few simulated days, incident
chances raised so that every type occurs.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from core.config.loader import load_model
from scenarios.catalog import ScenarioConfig, run_scenario
from scenarios.shipping.config import HARD_NEGATIVES, SHIPPING_INCIDENTS
from scenarios.shipping.ids import imo_numbers, iso6346
from scenarios.shipping.sink import split
from scenarios.shipping.topics import CONTAINERS, PORT_EVENTS, POSITIONS
from simulators.sinks import MemorySink
from simulators.sinks.base import Records

REPO = Path(__file__).resolve().parents[2]
DAY_S = 86_400.0


def config(ships: int, containers: int, **domain: Any) -> ScenarioConfig:
    base = load_model(ScenarioConfig, REPO / "config/scenarios/shipping.yaml")
    data = base.model_dump(mode="json")
    data["entities"] = ships + containers + 30
    data["classes"] = [
        {"name": "ship", "share": ships},
        {"name": "container", "share": containers},
        {"name": "port", "share": 30},
    ]
    data["domain"] = {**data["domain"], **domain, "capacity": containers // ships}
    return ScenarioConfig.model_validate(data)


def run(cfg: ScenarioConfig, days: float) -> MemorySink:
    sink = MemorySink()
    run_scenario(cfg, sink, duration_s=days * DAY_S, speed="max")
    return sink


@pytest.fixture(scope="module")
def stream() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[int]]:
    incidents = {
        "reefer_failure": 0.2,
        "lost_overboard": 0.6,
        "door_tamper": 0.05,
        "missed_unload": 0.1,
        "route_deviation": 0.5,
        "weather_routing": 0.4,
        "min_leg_h": 0.0,
    }
    sink = run(config(9, 900, incidents=incidents), 6.0)
    events = [orjson.loads(v) for v in sink.events.values]
    truth = [orjson.loads(v) for v in sink.truth.values]
    return events, truth, sink.events.timestamps


def test_same_seed_same_bytes_other_seed_differs() -> None:
    cfg = config(3, 150)
    a, b = run(cfg, 1.5), run(cfg, 1.5)
    assert len(a.events) > 1000
    assert a.events.values == b.events.values and a.events.keys == b.events.keys
    assert a.events.timestamps == b.events.timestamps and a.truth.values == b.truth.values
    c = run(cfg.with_overrides(seed=cfg.seed + 1), 1.5)
    assert c.events.values != a.events.values


def test_voyage_data_arrives_after_the_ship_reaches_port_days_late(stream: Any) -> None:
    events, truth, stamps = stream
    arrivals = {
        (e["ship_id"], e["voyage_id"]): e["event_time"]
        for e in events
        if e["schema"] == "shipping.port-event/1" and e["event"] == "arrival"
    }
    held = [
        (e, t, emit)
        for e, t, emit in zip(events, truth, stamps, strict=True)
        if e.get("channel") == "onboard" and (e["ship_id"], e["voyage_id"]) in arrivals
    ]
    assert len(held) > 1000
    for e, t, emit in held:  # nothing logged at sea is sent before the ship is in port
        assert emit >= arrivals[(e["ship_id"], e["voyage_id"])] - 120_000  # clock skew
        assert t["outage_id"] is not None
    late_h = np.array([(emit - t["true_time"]) / 3_600_000 for _, t, emit in held])
    assert np.median(late_h) > 12 and late_h.max() > 48  # days late, in bulk
    live = [
        (emit - t["true_time"]) / 1000
        for e, t, emit in zip(events, truth, stamps, strict=True)
        if e.get("channel") in ("satellite", "shore")
    ]
    assert live and max(live) < 120  # the satellite slice and the ports are live


def test_satellite_slice_is_thin(stream: Any) -> None:
    events, _, _ = stream
    positions = Counter(e["channel"] for e in events if e["schema"] == "shipping.position/1")
    assert 0 < positions["satellite"] < positions["onboard"] / 10
    alarms = [e for e in events if e.get("channel") == "satellite" and "alarm" in e]
    assert alarms and all(e["alarm"] != "none" for e in alarms)


def test_every_incident_type_and_hard_negative_is_in_truth(stream: Any) -> None:
    events, truth, _ = stream
    labels = Counter(t["label"] for t in truth)
    assert set(SHIPPING_INCIDENTS) <= set(labels)
    marks = Counter(t["hard_negative"] for t in truth)
    assert set(HARD_NEGATIVES) <= set(marks)
    for t in truth:  # labelled events carry an incident id; hard negatives never a label
        assert (t["label"] == "none") == (t["incident_id"] is None)
        assert t["hard_negative"] is None or t["label"] == "none"
    by_id = {e["event_id"]: e for e in events}
    for t in truth:
        e = by_id[t["event_id"]]
        if t["label"] == "route_deviation":
            assert e["schema"] == "shipping.position/1"
        elif t["label"] != "none":
            assert e["schema"] == "shipping.container/1"
        if t["label"] == "door_tamper":
            assert e["door_open"] or e["alarm"] in ("door", "none")
        if t["hard_negative"] == "door_in_port":
            assert e["door_open"] and e["channel"] == "shore"


def test_lost_boxes_go_silent_while_their_ship_reports(stream: Any) -> None:
    events, truth, _ = stream
    by_id = {e["event_id"]: e for e in events}
    falls = {
        by_id[t["event_id"]]["container_id"]: by_id[t["event_id"]]["event_time"]
        for t in truth
        if t["label"] == "lost_overboard" and by_id[t["event_id"]]["shock_g"] > 5
    }
    assert falls
    ship_last = max(e["event_time"] for e in events if e["schema"] == "shipping.position/1")
    assert ship_last > max(falls.values())
    lost = set(falls)
    last: dict[str, int] = {}
    for e in events:
        if e.get("container_id") in lost and e["schema"] == "shipping.container/1":
            last[e["container_id"]] = max(last.get(e["container_id"], 0), e["event_time"])
    for box in lost:
        final = [
            e
            for e in events
            if e.get("container_id") == box
            and e["schema"] == "shipping.container/1"
            and e["event_time"] == last[box]
        ]
        assert final[0]["shock_g"] > 5  # the last reading is the fall


def test_ports_ships_and_boxes_are_real_identifiers(stream: Any) -> None:
    events, _, _ = stream
    for e in events[:5000]:
        if e["schema"] == "shipping.container/1":
            box = e["container_id"]
            assert iso6346(box[:3], int(box[4:10])) == box
    ports = {e["port"] for e in events if e["schema"] == "shipping.port-event/1"}
    assert ports and all(len(p) == 5 for p in ports)
    kinds = Counter(e["event"] for e in events if e["schema"] == "shipping.port-event/1")
    assert {"arrival", "departure", "loaded", "unloaded"} <= set(kinds)
    speeds = [e["sog_kn"] for e in events if e.get("nav_status") == "under_way"]
    assert 12 < float(np.median(speeds)) < 23


def test_imo_check_digit() -> None:
    for imo in imo_numbers(50, np.random.default_rng(1)):
        digits = [int(c) for c in imo[3:]]
        assert (
            sum(d * w for d, w in zip(digits[:6], range(7, 1, -1), strict=True)) % 10 == digits[6]
        )
    assert iso6346("CSQ", 305438) == "CSQU3054383"  # the ISO 6346 worked example


def test_events_go_to_their_topic_by_key() -> None:
    records = Records(
        [b"IMO9123456", b"BBSU1234565", b"SGSIN", b"IMO9000007"],
        [b"a", b"b", b"c", b"d"],
        [1, 2, 3, 4],
    )
    parts = split(records)
    assert parts[POSITIONS].values == [b"a", b"d"] and parts[POSITIONS].timestamps == [1, 4]
    assert parts[CONTAINERS].keys == [b"BBSU1234565"]
    assert parts[PORT_EVENTS].keys == [b"SGSIN"]


def test_detectors_find_every_incident_type_and_no_hard_negative(stream: Any) -> None:
    import pandas as pd

    from detectors.shipping import (
        door_tamper,
        lost_overboard,
        missed_unload,
        reefer_failure,
        route_deviation,
    )

    events, truth, _ = stream
    t_by_id = {t["event_id"]: t for t in truth}
    frame = pd.DataFrame(events)
    boxes = frame[frame["schema"] == "shipping.container/1"]
    ships = frame[frame["schema"] == "shipping.position/1"]
    calls = frame[frame["schema"] == "shipping.port-event/1"]
    alerts = (
        reefer_failure(boxes)
        + door_tamper(boxes)
        + lost_overboard(boxes, ships)
        + missed_unload(boxes, calls)
        + route_deviation(ships)
    )
    end = max(t["true_time"] for t in truth)
    last: dict[str, int] = {}
    for t in truth:
        if t["label"] != "none":
            last[t["incident_id"]] = max(last.get(t["incident_id"], 0), t["true_time"])
    for label in SHIPPING_INCIDENTS:
        # incidents over before the run ends (a loiter cut short by the end is not one yet)
        incidents = {
            t["incident_id"]
            for t in truth
            if t["label"] == label and last[t["incident_id"]] < end - 6 * 3_600_000
        }
        mine = [a for a in alerts if a.rule == label]
        found = [
            {t_by_id[e]["incident_id"] for e in a.event_ids if t_by_id[e]["label"] == label}
            for a in mine
        ]
        precision = sum(bool(f) for f in found) / len(mine)
        recall = len(set().union(*found) & incidents) / len(incidents)
        assert precision >= 0.9 and recall >= 0.9, (label, precision, recall)
    for a in alerts:
        assert not any(t_by_id[e]["hard_negative"] for e in a.event_ids), a


def test_events_carry_their_contract_schemas_fields_in_order(stream: Any) -> None:
    """Every event has exactly its schema's keys, in wire order, and validates as its model."""
    from core.contracts.events import SHIPPING_CONTAINER, SHIPPING_PORT_EVENT, SHIPPING_POSITION

    schemas = {s.id: s for s in (SHIPPING_POSITION, SHIPPING_CONTAINER, SHIPPING_PORT_EVENT)}
    events, _, _ = stream
    seen = set()
    for event in events:
        schema = schemas[event["schema"]]
        assert tuple(event) == schema.names
        schema.model().model_validate(event)
        seen.add(schema.id)
    assert seen == set(schemas)
