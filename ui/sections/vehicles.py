"""Vehicles page: the vehicles fleet live.

- the `vehicles` scenario: its runs (stop), and the runs page's sliders to start one;
- figures: vehicles per status, the telemetry topic's records/s, and the `vehicles`
  job's rows/s, late drops, how far its watermark trails the newest reading (simulated time)
  and how many records it is behind the topic's end (from the `metrics` topic);
- a map of the vehicles' last GPS fixes (no tiles: a plain lon/lat plane with a 1° graticule
  and the region's cities, like the Map page), coloured by status, alerting vehicles ringed and
  labelled; click one to chart it;
- the chosen vehicle's recent telemetry (speed and limit, coolant, battery, tyres, acceleration)
  against its device clock, with its alerts as red rules at their event times, each
  alert's evidence, and its clock's estimated offset (`ui.clock`);
- the fleet's estimated clock offsets as a histogram (`vehicles.clock-offsets`).

The chosen vehicle is `?vehicle=ID` in the URL, a click on the map or the picker; until one is
picked, the page follows the newest alerting vehicle.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import altair as alt
import pandas as pd
import pydeck as pdk
import streamlit as st

from core.contracts import topics
from core.contracts.events import TYRES
from ui.client import ApiClient, ApiError, ApiUnavailable
from ui.clock import offset_text, render_histogram
from ui.layers import PIXELS, dots, labels, paths, rings
from ui.sections.alerts import evidence_lines
from ui.sections.runs import STATUS_ICONS, start_form, stop_run
from ui.view import REFRESH_S, api_errors, fmt_duration, fmt_ms, fmt_num, fmt_rate

SCENARIO = "vehicles"
TOPIC = topics.VEHICLES_TELEMETRY.name
JOB = "vehicles"
MAP_LIMIT = 2000
COLORS = {
    "moving": [30, 120, 220, 200],
    "parked": [140, 140, 140, 150],
    "alerting": [220, 20, 60, 255],
}
STATUS_ORDER = ("alerting", "moving", "parked")
#: The charts: title, unit and the signals drawn in each.
PANELS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("Speed", "km/h", ("speed_kmh", "speed_limit_kmh")),
    ("Coolant", "°C", ("coolant_c",)),
    ("Battery", "V", ("battery_v",)),
    ("Tyres", "kPa", TYRES),
    ("Acceleration", "m/s²", ("accel_long_ms2",)),
)
#: Readings this far before the newest one are a device clock reset (to 2000-01-01), not drawn.
CLOCK_RESET_MS = 6 * 3600 * 1000
PICK_KEY = "vehicle-pick"  # the picker's widget key
PICKED_KEY = "vehicle-picked"  # True once the user chose a vehicle (stop following alerts)
WIDTH_PX, HEIGHT_PX = 560, 480  # what the fit assumes (the map's column at 1400 px)


def render(client: ApiClient) -> None:
    st.header("Vehicles")
    wanted = st.query_params.get("vehicle")
    if wanted and not st.session_state.get(PICKED_KEY):
        st.session_state[PICK_KEY] = wanted
        st.session_state[PICKED_KEY] = True
    _scenario(client)
    _figures(client)
    _fleet(client)
    st.subheader("Telemetry")
    _telemetry(client)
    render_histogram(client, "vehicles", "vehicles")


# -- the scenario: runs, start form ----------------------------------------------------------


def _scenario(client: ApiClient) -> None:
    with st.expander("Vehicles runs: start, parameterize, stop", expanded=False):
        with api_errors("Listing scenarios"):
            scenarios = {s["name"]: s for s in client.scenarios()}
            if SCENARIO in scenarios:
                start_form(client, scenarios[SCENARIO])
            else:
                st.info(f"No `{SCENARIO}` scenario file next to the API.")
        st.markdown(
            f"Every run and scenario: [the Runs page](runs?scenario={SCENARIO}). Detection needs "
            f"the Spark job too: `streamsim pipeline run {JOB}`."
        )
    _scenario_runs(client)


@st.fragment(run_every=REFRESH_S * 2)
def _scenario_runs(client: ApiClient) -> None:
    try:
        runs = [r for r in client.runs() if r["scenario"] == SCENARIO]
    except (ApiUnavailable, ApiError):  # the figures below say what is wrong
        return
    active = [r for r in runs if r["status"] in ("running", "stopping")]
    if not runs:
        st.caption(f"No `{SCENARIO}` run from this API yet: start one above.")
        return
    for run in active or runs[:1]:
        left, right = st.columns([6, 1])
        summary = run.get("summary") or {}
        left.markdown(
            f"{STATUS_ICONS.get(run['status'], '')} run `{run['run_id']}` **{run['status']}** "
            f"since {fmt_ms(run['started_at'])} UTC · speed "
            f"{run['speed'] if run['speed'] is not None else 'file'}"
            + (f" · {fmt_num(summary.get('events'))} events" if summary else "")
            + (f" · overrides `{_overrides(run['overrides'])}`" if run.get("overrides") else "")
        )
        stop = run in active and client.can_control
        if stop and right.button(
            "Stop", key=f"vehicles-stop-{run['run_id']}", icon=":material/stop:"
        ):
            stop_run(client, run["run_id"])


def _overrides(value: Any) -> str:
    import json

    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= 120 else text[:117] + "..."


# -- figures ---------------------------------------------------------------------------------


def job_queries(queries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The vehicles job's queries among the pipeline's."""
    return [q for q in queries if q.get("job") == JOB]


def job_summary(view: dict[str, Any]) -> dict[str, Any] | None:
    """The vehicles job's figures (`GET /v1/pipeline` `jobs`)."""
    return next((j for j in view.get("jobs") or [] if j["job"] == JOB), None)


def topic_rate(rates: dict[str, Any], topic: str = TOPIC) -> float | None:
    for row in rates.get("topics", []):
        if row["topic"] == topic:
            value = row.get("records_per_s")
            return float(value) if isinstance(value, int | float) else None
    return None


@st.fragment(run_every=REFRESH_S)
def _figures(client: ApiClient) -> None:
    with api_errors("Reading the fleet"):
        fleet = client.vehicles(limit=1)
        rates = client.rates()
        pipeline = client.pipeline()
        queries = job_queries(pipeline["queries"])
        job = job_summary(pipeline)
        counts = fleet["counts"]
        fleet_cols = st.columns(5)
        fleet_cols[0].metric("Vehicles seen", fmt_num(sum(counts.values())), border=True)
        fleet_cols[1].metric("Moving", fmt_num(counts.get("moving")), border=True)
        fleet_cols[2].metric("Parked", fmt_num(counts.get("parked")), border=True)
        fleet_cols[3].metric("Alerting", fmt_num(counts.get("alerting")), border=True)
        fleet_cols[4].metric("Telemetry (topic)", fmt_rate(topic_rate(rates)), border=True)
        cols = st.columns([1, 1.2, 1.4, 1.05])  # each label in full at 1400 px
        if queries and job is not None:
            cols[0].metric(f"{JOB} rows/s", fmt_rate(job["processed_rows_per_s"]), border=True)
            cols[1].metric(
                "Late events dropped (seen)",
                fmt_num(job["late_events_seen"]),
                border=True,
                help="Readings the job dropped as too late for its watermark, each counted "
                "once, over the progress reports the API has seen.",
            )
            cols[2].metric(
                "Watermark behind newest reading",
                fmt_duration(job.get("watermark_behind_newest_s")),
                border=True,
                help="Event time of the newest reading the job read minus its watermark, both "
                "on the run's simulated clock, the largest over the job's queries: how far "
                "the watermark trails the data (its configured delay, plus any skew).",
            )
            cols[3].metric(
                "Behind the topic's end",
                fmt_num(job.get("offsets_behind")),
                border=True,
                help="Readings on the topic the job had not read yet at its last batch "
                "(latest minus end offset, summed over partitions), the largest over the "
                "job's queries: the backlog, whatever the clock.",
            )
            with st.expander(f"The {JOB} job's queries ({len(queries)})"):
                st.table(_queries_frame(queries))
        else:
            cols[0].info(
                f"No progress from the `{JOB}` job on `metrics` yet: "
                f"`streamsim pipeline run {JOB}`."
            )
        sampling, source = fleet["sampling"], fleet["source"]
        st.caption(
            f"`{source['topic']}`: {source['partitions']} partitions followed, "
            f"{fmt_num(sampling['records_read'])} read, {fmt_num(sampling['records_skipped'])} "
            f"skipped (the feed reads at most {fmt_num(sampling['read_cap_per_s'])}/s and jumps "
            "ahead on a faster topic). Parked: nothing from it for a while (parked vehicles "
            "send nothing; tunnels and dead zones hold readings back)."
            + (f" Kafka: {source['error']}" if source.get("error") else "")
        )


def _queries_frame(queries: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "query": q["query"],
                "mode": q.get("mode") or "—",
                "processed rows/s": fmt_rate(q.get("processed_rows_per_s")),
                "watermark (UTC)": fmt_ms(q.get("watermark_ms")),
                "watermark behind newest": fmt_duration(q.get("watermark_behind_newest_s")),
                "behind topic end (records)": fmt_num(q.get("offsets_behind")),
                "late drops (seen)": fmt_num(q.get("late_events_seen")),
            }
            for q in queries
        ]
    ).set_index("query")


# -- the map ---------------------------------------------------------------------------------


def map_points(vehicles: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Vehicles with a fix, as map points; alerting ones last (drawn on top)."""
    points = []
    for v in vehicles:
        if not isinstance(v.get("lat"), int | float) or not isinstance(v.get("lon"), int | float):
            continue
        alert = v.get("last_alert") or {}
        status = v["status"]
        points.append(
            {
                "vehicle_id": v["vehicle_id"],
                "lon": float(v["lon"]),
                "lat": float(v["lat"]),
                "status": status,
                "speed": fmt_num(v.get("speed_kmh")),
                "road": v.get("road_class") or "?",
                "fix": "" if v.get("gps_fix", True) else " (no fix: last known position)",
                "alert": (
                    f"! {alert.get('label') or alert.get('rule')}" if status == "alerting" else ""
                ),
                "color": COLORS.get(status, COLORS["moving"]),
                "radius": 7 if status == "alerting" else 4,
            }
        )
    points.sort(key=lambda p: -STATUS_ORDER.index(p["status"]))
    return points


def fit(points: list[dict[str, Any]]) -> tuple[float, float, float]:
    """Centre (lon, lat) and orthographic zoom that fit the points (Germany when none)."""
    if not points:
        return 10.4, 51.1, math.log2(min(WIDTH_PX / 11, HEIGHT_PX / 9))
    lons = [p["lon"] for p in points]
    lats = [p["lat"] for p in points]
    span_x = max(max(lons) - min(lons), 1.0) * 1.3
    span_y = max(max(lats) - min(lats), 0.7) * 1.3
    zoom = math.log2(min(WIDTH_PX / span_x, HEIGHT_PX / span_y))
    return (max(lons) + min(lons)) / 2, (max(lats) + min(lats)) / 2, min(zoom, 12.0)


@cache
def _big_cities() -> tuple[dict[str, Any], ...]:
    try:
        from core.geo import geonames_cities

        every = geonames_cities()
    except Exception:  # only decoration
        return ()
    big = sorted((c for c in every if c["population"] >= 150_000), key=lambda c: -c["population"])
    return tuple(
        {"name": c["name"], "lon": float(c["longitude"]), "lat": float(c["latitude"])} for c in big
    )


def cities_near(
    lon: float, lat: float, zoom: float, most: int = 30, apart_px: float = 60.0
) -> list[dict[str, Any]]:
    """The biggest cities in view, for orientation, none within `apart_px` of a bigger one
    (labels do not pile up in the Ruhr)."""
    half_x, half_y = WIDTH_PX / 2**zoom / 2, HEIGHT_PX / 2**zoom / 2
    apart = apart_px / 2**zoom
    chosen: list[dict[str, Any]] = []
    for c in _big_cities():  # biggest first
        if abs(c["lon"] - lon) > half_x or abs(c["lat"] - lat) > half_y:
            continue
        if any(abs(c["lon"] - o["lon"]) < apart and abs(c["lat"] - o["lat"]) < apart / 2
               for o in chosen):  # fmt: skip
            continue
        chosen.append(c)
        if len(chosen) >= most:
            break
    return chosen


def graticule(lon: float, lat: float, zoom: float) -> list[dict[str, Any]]:
    half_x, half_y = WIDTH_PX / 2**zoom, HEIGHT_PX / 2**zoom
    step = 1 if max(half_x, half_y) <= 20 else 10
    x0, x1 = math.floor(lon - half_x), math.ceil(lon + half_x)
    y0, y1 = math.floor(lat - half_y), math.ceil(lat + half_y)
    lines = [{"path": [[x, y0], [x, y1]]} for x in range(x0, x1 + 1) if x % step == 0]
    lines += [{"path": [[x0, y], [x1, y]]} for y in range(y0, y1 + 1) if y % step == 0]
    return lines


def deck(vehicles: list[dict[str, Any]], selected: str | None) -> pdk.Deck:
    points = map_points(vehicles)
    lon, lat, zoom = fit(points)
    alerting = [p for p in points if p["status"] == "alerting"]
    chosen = [p for p in points if p["vehicle_id"] == selected]
    cities = cities_near(lon, lat, zoom)
    layers = [
        paths("graticule", graticule(lon, lat, zoom), [128, 128, 128, 50], 1),
        dots("city-dots", cities, 3, [110, 110, 110, 170]),
        labels(
            "cities",
            cities,
            "name",
            12,
            [110, 110, 110, 220],
            [6, 0],
            character_set=pdk.types.String("auto"),
        ),
        dots(
            "vehicles",
            points,
            "radius",
            "color",
            stroked=True,
            get_line_color=[255, 255, 255, 200],
            get_line_width=1,
            line_width_units=PIXELS,
            pickable=True,
        ),
        rings("alert-rings", alerting, 14, [220, 20, 60, 255], 3),  # alert: a ring, a label
        labels("alert-labels", alerting, "alert", 14, [200, 0, 40, 255], [17, -12]),
        rings("selected", chosen, 20, [255, 170, 0, 255], 2),
    ]
    return pdk.Deck(
        layers=layers,
        views=[pdk.View(type="OrthographicView", controller=True, flip_y=False)],
        initial_view_state=pdk.ViewState(target=[lon, lat, 0], zoom=zoom),
        map_provider=None,
        map_style=None,
        tooltip={"text": "{vehicle_id} {status}{fix}\n{speed} km/h, {road}\n{alert}"},
    )


def _on_map_pick() -> None:
    state = st.session_state.get("vehicles-map")
    objects = (getattr(state, "selection", None) or {}).get("objects") or {}
    for picked in objects.get("vehicles") or []:
        st.session_state[PICK_KEY] = picked["vehicle_id"]
        st.session_state[PICKED_KEY] = True


@st.fragment(run_every=REFRESH_S * 1.5)
def _fleet(client: ApiClient) -> None:
    left, right = st.columns([3, 2])
    with api_errors("Reading the fleet"):
        fleet = client.vehicles(limit=MAP_LIMIT)
        vehicles = fleet["vehicles"]
        with left:
            if not vehicles:
                st.info(
                    f"No vehicle on `{TOPIC}` yet: start a `{SCENARIO}` run (above, or on the "
                    "Runs page)."
                )
            st.pydeck_chart(
                deck(vehicles, st.session_state.get(PICK_KEY)),
                height=HEIGHT_PX,
                key="vehicles-map",
                on_select=_on_map_pick,
                selection_mode="single-object",
                alt="The vehicles' last GPS fixes; alerting ones red, ringed and labelled.",
            )
            shown = len(map_points(vehicles))
            st.caption(
                f"{fmt_num(fleet['count'])} vehicles ({shown} with a position) · "
                ":blue[●] moving · :gray[●] parked · :red[●] alerting (ringed, labelled) · "
                ":orange[○] the charted vehicle. Click a vehicle to chart it."
            )
        with right:
            _fleet_alerts(vehicles)


def _fleet_alerts(vehicles: list[dict[str, Any]]) -> None:
    alerting = [v for v in vehicles if v.get("last_alert")]
    alerting.sort(key=lambda v: -(v["last_alert"].get("detected_at") or 0))
    st.markdown(f"**Vehicle alerts** ({len(alerting)} vehicles)")
    if not alerting:
        st.caption(
            f"None yet: the `{JOB}` job writes them to `alerts` (`streamsim pipeline run {JOB}`)."
        )
        return
    for v in alerting[:6]:
        alert = v["last_alert"]
        with st.container(border=True):
            st.markdown(
                f"**{alert.get('label') or alert['rule']}** · `{v['vehicle_id']}` · "
                f"{alert['rule']}  \nevent time {fmt_ms(alert.get('event_time'))} · detected "
                f"{fmt_ms(alert.get('detected_at'))} UTC"
                + (f" · {v['alerts']} alerts" if v["alerts"] > 1 else "")
            )
            st.code("\n".join(evidence_lines(alert.get("evidence") or {})), language=None)


# -- one vehicle's telemetry -----------------------------------------------------------------


def default_vehicle(vehicles: list[dict[str, Any]]) -> str | None:
    """The newest alerting vehicle, else the first moving one, else any."""
    alerted = [v for v in vehicles if v["status"] == "alerting" and v.get("last_alert")]
    if alerted:
        newest = max(alerted, key=lambda v: v["last_alert"].get("detected_at") or 0)
        return str(newest["vehicle_id"])
    for status in ("moving", "parked", "alerting"):
        for v in vehicles:
            if v["status"] == status:
                return str(v["vehicle_id"])
    return None


def _label(vehicle: dict[str, Any] | None, vehicle_id: str) -> str:
    if vehicle is None:
        return vehicle_id
    alert = vehicle.get("last_alert") or {}
    extra = (
        f" ! {alert.get('label') or alert.get('rule')}" if vehicle["status"] == "alerting" else ""
    )
    return f"{vehicle_id} · {vehicle['status']}{extra}"


def _picked() -> None:
    st.session_state[PICKED_KEY] = True


@st.fragment(run_every=REFRESH_S * 1.5)
def _telemetry(client: ApiClient) -> None:
    with api_errors("Reading telemetry"):
        vehicles = client.vehicles(limit=500)["vehicles"]
        by_id = {v["vehicle_id"]: v for v in vehicles}
        if not st.session_state.get(PICKED_KEY) or st.session_state.get(PICK_KEY) is None:
            st.session_state[PICK_KEY] = default_vehicle(vehicles)
        chosen = st.session_state.get(PICK_KEY)
        if chosen is None:
            st.info("No vehicle to chart yet.")
            return
        options = [chosen, *(v for v in by_id if v != chosen)]
        left, right = st.columns([2, 1])
        vehicle_id = left.selectbox(
            "Vehicle",
            options,
            key=PICK_KEY,
            format_func=lambda v: _label(by_id.get(v), v),
            on_change=_picked,
            help="Alerting first. Until you pick one, the newest alerting vehicle is charted.",
        )
        limit = right.select_slider(
            "Readings", [60, 120, 300, 600], value=300, key="vehicle-readings"
        )
        try:
            data = client.vehicle_readings(str(vehicle_id), limit=int(limit))
        except ApiError as exc:
            if exc.status != 404:
                raise
            st.info(f"Nothing of `{vehicle_id}` seen by the API (yet).")
            return
        _vehicle_summary(data)
        _charts(data)
        _vehicle_alerts(data["alerts"])


def _vehicle_summary(data: dict[str, Any]) -> None:
    v = data["vehicle"]
    st.markdown(
        f"**Telemetry of `{data['vehicle_id']}`** — {v['status']}"
        + (f", {fmt_num(v.get('speed_kmh'))} km/h" if v.get("speed_kmh") is not None else "")
        + (f" on a {v['road_class']} road" if v.get("road_class") else "")
        + (f" (limit {fmt_num(v.get('speed_limit_kmh'))})" if v.get("speed_limit_kmh") else "")
        + (f", trip {v['trip_id']}" if v.get("trip_id") is not None else "")
        + f" · last reading: event time {fmt_ms(v.get('event_time'))}, read "
        f"{fmt_ms(v.get('received_at'))} UTC"
    )
    st.caption(offset_text(data.get("clock"), "vehicles"))
    if not data["tracked"]:
        st.caption(
            "Its readings were not being kept (the API keeps a history for a few hundred "
            "vehicles); they are from now on."
        )


def telemetry_frame(readings: list[dict[str, Any]]) -> tuple[pd.DataFrame, int]:
    """Long format (time, signal, value) by device clock; readings of a clock reset left out
    (their count is returned)."""
    if not readings:
        return pd.DataFrame(columns=["time", "signal", "value"]), 0
    newest = max(r["event_time"] for r in readings)
    kept = [r for r in readings if r["event_time"] >= newest - CLOCK_RESET_MS]
    rows = [
        {"time": r["event_time"], "signal": name, "value": value}
        for r in kept
        for name, value in r.items()
        if name not in ("event_time", "seq", "received_at") and value is not None
    ]
    frame = pd.DataFrame(rows, columns=["time", "signal", "value"])
    frame["time"] = pd.to_datetime(frame["time"], unit="ms")
    return frame, len(readings) - len(kept)


def alert_marks(alerts: list[dict[str, Any]], frame: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Alerts at their event times inside the charted window (and how many fall outside)."""
    marks = [
        {
            "time": pd.to_datetime(a["event_time"], unit="ms"),
            "alert": f"{a.get('label') or a['rule']} ({a['rule']})",
        }
        for a in alerts
        if isinstance(a.get("event_time"), int)
    ]
    if frame.empty or not marks:
        return pd.DataFrame(columns=["time", "alert"]), len(marks)
    low, high = frame["time"].min(), frame["time"].max()
    margin = max((high - low) * 0.1, pd.Timedelta(seconds=30))
    inside = [m for m in marks if low - margin <= m["time"] <= high + margin]
    return pd.DataFrame(inside, columns=["time", "alert"]), len(marks) - len(inside)


def panel_chart(frame: pd.DataFrame, marks: pd.DataFrame, title: str, unit: str) -> Any:
    x = alt.X("time:T", title=None, axis=alt.Axis(format="%H:%M:%S", labelOverlap=True))
    several = frame["signal"].nunique() > 1
    lines = (
        alt.Chart(frame)
        .mark_line(interpolate="linear", strokeWidth=1.5)
        .encode(
            x=x,
            y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)),
            color=alt.Color(
                "signal:N",
                legend=alt.Legend(orient="top", title=None) if several else None,
            ),
            strokeDash=alt.condition(
                alt.datum.signal == "speed_limit_kmh", alt.value([4, 3]), alt.value([1, 0])
            ),
            tooltip=[
                "signal",
                alt.Tooltip("value:Q", format=",.2f"),
                alt.Tooltip("time:T", format="%H:%M:%S"),
            ],
        )
    )
    layers: list[alt.Chart] = [lines]
    if not marks.empty:
        rules = (
            alt.Chart(marks)
            .mark_rule(color="crimson", strokeWidth=2)
            .encode(x="time:T", tooltip=["alert", alt.Tooltip("time:T", format="%H:%M:%S")])
        )
        labels = (
            alt.Chart(marks)
            .mark_text(color="crimson", align="left", dx=3, dy=-4, baseline="top", fontSize=11)
            .encode(x="time:T", y=alt.value(2), text="alert")
        )
        layers += [rules, labels]
    return alt.layer(*layers).properties(title=f"{title} ({unit})", height=210)


def _charts(data: dict[str, Any]) -> None:
    frame, reset = telemetry_frame(data["readings"])
    if frame.empty:
        st.info(
            "No readings kept for it yet: they arrive with its next reports (a parked vehicle "
            "sends nothing)."
        )
        return
    marks, outside = alert_marks(data["alerts"], frame)
    columns = st.columns(2)
    for i, (title, unit, signals) in enumerate(PANELS):
        part = frame[frame["signal"].isin(signals)]
        if part.empty:
            continue
        with columns[i % 2]:
            st.altair_chart(panel_chart(part, marks, title, unit), width="stretch")
    n = len(data["readings"])
    st.caption(
        f"{n} recent readings (of at most {data['history_len']} kept) against the device's "
        "clock (event time, UTC); red rules: its alerts at their event times."
        + (f" {reset} readings of a clock reset left out." if reset else "")
        + (f" {outside} alerts outside this window." if outside else "")
    )


def _vehicle_alerts(alerts: list[dict[str, Any]]) -> None:
    if not alerts:
        st.caption("No alert of this vehicle.")
        return
    st.markdown(f"**Its alerts** ({len(alerts)}, newest first)")
    for alert in alerts[:10]:
        with st.container(border=True):
            st.markdown(
                f"**{alert.get('label') or alert['rule']}** · rule {alert['rule']} · event time "
                f"{fmt_ms(alert.get('event_time'))} · detected {fmt_ms(alert.get('detected_at'))}"
                f" UTC · {alert.get('job') or '?'}"
            )
            st.code("\n".join(evidence_lines(alert.get("evidence") or {})), language=None)
            ids = alert.get("event_ids") or []
            if ids:
                st.caption(f"events: {', '.join(ids[:5])}{' …' if len(ids) > 5 else ''}")
