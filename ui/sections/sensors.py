"""Sensors page: one sensors run's devices, a device's series and the run's sensor alerts.

- figures: devices and sites seen, devices reporting low battery, the run's alerts;
- a site map: the scenario names its sites and gives them no coordinates, so each site sits at
  a fixed place derived from its name (a layout, not geography), sized by its devices and red
  when a device there has an alert; hover for the site;
- a device picker (alerting devices first) and its recent temperature, humidity and battery
  against its device clock, its alerts as red rules at their event times;
- the run's alerts (stuck sensor, spike, low battery, silent device) with their evidence;
- the device's estimated clock offset beside its series, and the fleet's offset histogram
  (`sensors.clock-offsets`, `ui.clock`).

Read-only, like the Vehicles page's figures: all of it from the open `/v1/sensors` routes.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from core.contracts import topics
from ui.client import ApiClient, ApiError, ApiUnavailable
from ui.clock import offset_text, render_histogram
from ui.sections.alerts import evidence_lines
from ui.view import REFRESH_S, api_errors, fmt_ms, fmt_num, run_picker

TOPIC = topics.SENSORS_READINGS.name
JOB = "sensors"
START_RUN = "streamsim simulate config/scenarios/sensors.yaml"
RUN_KEY = "sensors-run"
PICK_KEY = "sensors-device"
MAP_LABELS = 40  # sites named on the map, at most
#: The series charted, with their units.
SIGNALS = (("temperature_c", "°C"), ("humidity_pct", "%"), ("battery_v", "V"))


def render(client: ApiClient) -> None:
    st.header("Sensors")
    st.caption(
        f"A sensors run's devices (`{TOPIC}`) and the alerts of its job (`{JOB}`). "
        f"Start a run: `{START_RUN}` or the [Runs page](runs?scenario=sensors); "
        f"detection: `streamsim pipeline run {JOB}`."
    )
    _fleet(client)


@st.fragment(run_every=REFRESH_S * 1.5)
def _fleet(client: ApiClient) -> None:
    run = st.session_state.get(RUN_KEY) or None
    try:
        fleet = client.sensors(run=run)
        alerts = client.sensor_alerts(run=fleet["run"], limit=100)["alerts"]
    except (ApiUnavailable, ApiError) as exc:
        st.error(f"**Reading the sensors failed**: {exc}", icon=":material/cloud_off:")
        return
    source = fleet["source"]
    if source["error"]:
        st.error(f"The sensor feed cannot read `{TOPIC}`: {source['error']}")
    devices = fleet["devices"]
    if not devices:
        st.info(f"No sensor reading on `{TOPIC}` yet. Start a run: `{START_RUN}`.")
        return
    runs = [r["run"] for r in fleet["runs"]]
    run_picker(runs, RUN_KEY, "sensor ids")
    st.caption(
        f"Run `{fleet['run']}` · {fmt_num(source['records_read'])} readings read, "
        f"{fmt_num(source['records_skipped'])} skipped (read cap "
        f"{fmt_num(source['read_cap_per_s'])}/s)"
    )
    cols = st.columns(4)
    cols[0].metric("Devices seen", fmt_num(fleet["matched"]))
    cols[1].metric("Sites", fmt_num(len(fleet["sites"])))
    cols[2].metric("Low battery", fmt_num(sum(d["status"] == "low_battery" for d in devices)))
    cols[3].metric("Sensor alerts", fmt_num(len(alerts)))
    left, right = st.columns([2, 3])
    with left:
        st.subheader("Site map")
        st.altair_chart(site_map(fleet["sites"]), width="stretch")
    with right:
        _device(client, fleet["run"], devices)
    st.subheader("Alerts")
    _alerts(alerts)
    render_histogram(client, "sensors", "sensors")


def site_map(sites: list[dict[str, Any]]) -> alt.LayerChart:
    """The sites at their layout places, sized by devices, red where a device has an alert."""
    frame = pd.DataFrame(sites, columns=["site", "x", "y", "devices", "alerts"])
    frame["state"] = ["alerting" if a else "ok" for a in frame["alerts"]]
    axis = alt.Axis(labels=False, ticks=False, title=None, grid=False)
    base = alt.Chart(frame).encode(
        x=alt.X("x:Q", scale=alt.Scale(domain=[0, 100]), axis=axis),
        y=alt.Y("y:Q", scale=alt.Scale(domain=[0, 100]), axis=axis),
        tooltip=["site:N", "devices:Q", "alerts:Q"],
    )
    dots = base.mark_circle(opacity=0.8, stroke="black", strokeWidth=0.5).encode(
        size=alt.Size("devices:Q", legend=None),  # the tooltip says how many
        color=alt.Color(
            "state:N",
            scale=alt.Scale(domain=["ok", "alerting"], range=["#1e78dc", "#dc143c"]),
            title=None,
        ),
    )
    names = base.mark_text(align="left", dx=8, fontSize=11).encode(text="site:N")
    # Names only while they stay legible: a big fleet has hundreds of sites.
    layers = [dots, names] if len(frame) <= MAP_LABELS else [dots]
    return alt.LayerChart(layer=layers).properties(height=360)


def device_order(devices: list[dict[str, Any]]) -> list[str]:
    """Sensor ids, those with alerts first (most first), then by id."""
    return [d["sensor_id"] for d in sorted(devices, key=lambda d: (-d["alerts"], d["sensor_id"]))]


def series_frame(readings: list[dict[str, Any]]) -> pd.DataFrame:
    """Readings in long form (time, signal, value) for a faceted chart; gaps dropped."""
    rows = [
        {"time": pd.to_datetime(r["event_time"], unit="ms"), "signal": name, "value": r[name]}
        for r in readings
        for name, _ in SIGNALS
        if r.get(name) is not None
    ]
    return pd.DataFrame(rows, columns=["time", "signal", "value"])


def series_chart(frame: pd.DataFrame, alerts: list[dict[str, Any]]) -> alt.FacetChart:
    """One panel per signal (own y scale), the device's alerts as red rules in each."""
    marks = pd.DataFrame(
        [
            {"time": pd.to_datetime(a["event_time"], unit="ms"), "label": a.get("label") or ""}
            for a in alerts
            if isinstance(a.get("event_time"), int)
        ],
        columns=["time", "label"],
    )
    start, end = (frame["time"].min(), frame["time"].max()) if len(frame) else (None, None)
    if len(marks) and start is not None:
        marks = marks[(marks["time"] >= start) & (marks["time"] <= end)]
    lines = (
        alt.Chart()
        .mark_line(point=True)
        .encode(
            x=alt.X("time:T", title="device clock (UTC)"),
            y=alt.Y(
                "value:Q", scale=alt.Scale(zero=False), title=None, axis=alt.Axis(format=".4~r")
            ),
        )
    )
    rules = alt.Chart(marks).mark_rule(color="#dc143c").encode(x="time:T", tooltip=["label:N"])
    return (
        alt.layer(lines, rules, data=frame)
        .properties(height=110)
        .facet(row=alt.Row("signal:N", title=None, sort=[name for name, _ in SIGNALS]))
        .resolve_scale(y="independent")
    )


def _device(client: ApiClient, run: str | None, devices: list[dict[str, Any]]) -> None:
    order = device_order(devices)
    if st.session_state.get(PICK_KEY) not in order:
        st.session_state[PICK_KEY] = order[0]
    by_id = {d["sensor_id"]: d for d in devices}
    picked = st.selectbox(
        "Device",
        order,
        key=PICK_KEY,
        format_func=lambda s: (
            f"{s} · {by_id[s]['site']}"
            + (f" · {by_id[s]['alerts']} alerts" if by_id[s]["alerts"] else "")
        ),
    )
    with api_errors("Reading the device's series"):
        data = client.sensor_series(picked, run=run)
        st.subheader(f"Series of {picked}")
        last = data["readings"][-1] if data["readings"] else {}
        st.caption(
            f"Site {data['site']} · status {data['status'] or '—'} · "
            f"{len(data['readings'])} recent readings, newest {fmt_ms(last.get('event_time'))} "
            "UTC · red rules: its alerts at their event times"
        )
        st.caption(offset_text(data.get("clock"), "sensors"))
        frame = series_frame(data["readings"])
        if len(frame):
            st.altair_chart(series_chart(frame, data["alerts"]), width="stretch")


def alert_rows(alerts: list[dict[str, Any]]) -> pd.DataFrame:
    """The alerts table: detection time, label, device, event time, evidence on one line."""
    return pd.DataFrame(
        [
            {
                "detected (UTC)": fmt_ms(a.get("detected_at")),
                "label": a.get("label") or a.get("rule"),
                "device": a.get("entity_id"),
                "event time (UTC)": fmt_ms(a.get("event_time")),
                "evidence": "; ".join(line.strip() for line in evidence_lines(a.get("evidence"))),
            }
            for a in alerts
        ],
        columns=["detected (UTC)", "label", "device", "event time (UTC)", "evidence"],
    )


def _alerts(alerts: list[dict[str, Any]]) -> None:
    if not alerts:
        st.info(f"No sensor alert for this run yet: is `streamsim pipeline run {JOB}` running?")
        return
    st.table(alert_rows(alerts).set_index("detected (UTC)"))
