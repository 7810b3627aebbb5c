"""The shipping rules on hand-made histories: each fires on its incident and not on the hard
negative next to it (defrost, door opened in port, transshipment, weather routing)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from detectors.shipping import (
    door_tamper,
    lost_overboard,
    missed_unload,
    reefer_failure,
    route_deviation,
)

MIN = 60_000
T0 = 1_772_409_600_000


def box_rows(n: int, every_min: int = 15, **cols: Any) -> pd.DataFrame:
    base: dict[str, Any] = {
        "container_id": "BBSU1234565",
        "ship_id": "IMO9000007",
        "voyage_id": 5,
        "port": None,
        "discharge_port": "AUSYD",
        "setpoint_c": -18.0,
        "temp_c": -18.0,
        "power_kw": 4.5,
        "door_open": False,
        "shock_g": 0.3,
    }
    base.update(cols)
    frame = pd.DataFrame([base] * n)
    frame["event_time"] = [T0 + i * every_min * MIN for i in range(n)]
    frame["event_id"] = [f"e{i:04d}" for i in range(n)]
    return frame


def test_reefer_failure_on_lost_cooling_not_on_defrost() -> None:
    defrost = box_rows(40)
    defrost.loc[10:12, "temp_c"] = [-15.0, -13.5, -15.5]  # +4.5 C for 45 min
    defrost.loc[10:12, "power_kw"] = 2.4  # the heater
    assert reefer_failure(defrost) == []
    failed = box_rows(40)
    failed.loc[20:, "power_kw"] = 0.8
    failed.loc[20:, "temp_c"] = [-18 + 0.3 * k for k in range(20)]
    alerts = reefer_failure(failed)
    assert [a.evidence["signal"] for a in alerts] == ["low_power"]  # one alert per failure
    assert alerts[0].event_ids == ("e0020", "e0021") and alerts[0].label == "reefer_failure"
    assert reefer_failure(failed)[0].alert_id == alerts[0].alert_id  # stable on re-scoring
    warming = box_rows(40)  # a unit that runs but loses the battle (e.g. a door seal)
    warming.loc[20:, "temp_c"] = [-18 + 0.4 * k for k in range(20)]
    [alert] = reefer_failure(warming)
    assert alert.evidence["signal"] == "off_setpoint"


def test_door_tamper_at_sea_not_in_port() -> None:
    in_port = box_rows(10, port="SGSIN")
    in_port.loc[3:5, "door_open"] = True
    assert door_tamper(in_port) == []
    at_sea = box_rows(10)
    at_sea.loc[3:4, "door_open"] = True
    alerts = door_tamper(at_sea)
    assert len(alerts) == 1 and alerts[0].event_ids == ("e0003",)


def positions(n: int, every_min: int = 10, ship: str = "IMO9000007", **cols: Any) -> pd.DataFrame:
    base: dict[str, Any] = {
        "ship_id": ship,
        "voyage_id": 5,
        "sog_kn": 18.0,
        "nav_status": "under_way",
        "lat": 1.0,
        "lon": 104.0,
    }
    base.update(cols)
    frame = pd.DataFrame([base] * n)
    frame["event_time"] = [T0 + i * every_min * MIN for i in range(n)]
    frame["event_id"] = [f"p{i:04d}" for i in range(n)]
    return frame


def test_lost_overboard_when_the_box_goes_silent_at_sea_not_when_unloaded() -> None:
    ship = positions(60)  # ten hours of positions
    lost = box_rows(8, every_min=15)  # two hours, then nothing
    lost.loc[7, "shock_g"] = 17.0
    alerts = lost_overboard(lost, ship)
    assert len(alerts) == 1 and alerts[0].event_ids[-1] == "e0007"
    assert alerts[0].evidence["last_shock_g"] == 17.0
    transshipped = box_rows(8, every_min=15)
    transshipped.loc[6:, "port"] = "SGSIN"  # unloaded at the hub: last seen in port
    assert lost_overboard(transshipped, ship) == []
    short = positions(12)  # the ship's data ends soon after: too early to say
    assert lost_overboard(lost, short) == []


def test_no_box_is_lost_on_the_satellite_slice_alone() -> None:
    """A box's temperature alarm went up live; the ship's satellite positions go on for hours
    while both held logs wait for the port: the box has not fallen silent."""
    alarm = box_rows(1, temp_c=-9.0)
    live = positions(3, every_min=240, channel="satellite")  # every 4 h, for 8 h
    assert lost_overboard(alarm, live) == []
    held = pd.concat([live, positions(60, channel="onboard")], ignore_index=True)
    [alert] = lost_overboard(alarm, held)  # the voyage landed: the ship's log went on
    assert alert.event_ids == ("e0000",)


def test_missed_unload_after_leaving_the_discharge_port() -> None:
    events = pd.DataFrame(
        [
            {"event": "departure", "port": "SGSIN", "ship_id": "IMO9000007", "voyage_id": 5,
             "event_id": "p1"},
            {"event": "arrival", "port": "AUSYD", "ship_id": "IMO9000007", "voyage_id": 5,
             "event_id": "p2"},
        ]
    )  # fmt: skip
    missed = box_rows(6, discharge_port="SGSIN")
    alerts = missed_unload(missed, events)
    assert len(alerts) == 1 and alerts[0].event_ids == ("e0000",)
    # the voyage's readings land in parts: the alert keeps its id
    assert [a.alert_id for a in missed_unload(missed.iloc[3:], events)] == [alerts[0].alert_id]
    # a re-run of the same fleet (same box and voyage, its own event ids) is a new alert
    rerun = events.assign(event_id=["r1", "r2"])
    [again] = missed_unload(missed.assign(event_id=missed["event_id"] + "r"), rerun)
    assert again.alert_id != alerts[0].alert_id
    onward = box_rows(6, discharge_port="AUSYD")  # on its way: fine
    in_port = box_rows(6, discharge_port="SGSIN", port="SGSIN")  # not yet sailed
    assert missed_unload(onward, events) == [] and missed_unload(in_port, events) == []


def test_route_deviation_on_loitering_not_on_weather_routing() -> None:
    detour = positions(60)  # off the lane but at speed: the position says little
    detour["lat"] = [1.0 + 0.02 * k for k in range(60)]
    assert route_deviation(detour) == []
    moored = positions(20, nav_status="moored", sog_kn=0.0)
    assert route_deviation(moored) == []
    loiter = positions(60)
    loiter.loc[20:35, "sog_kn"] = 1.2
    alerts = route_deviation(loiter)
    assert len(alerts) == 1 and alerts[0].event_ids[0] == "p0020"
    assert alerts[0].event_time == loiter.loc[26, "event_time"]  # after an hour
