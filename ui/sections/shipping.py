"""Shipping page: the container-shipping scenario as the shore sees it.

- figures: ships at sea and in port, records held on board, the run's clock, the feed's lag;
- a map of the ships' newest positions with their tracks (the lane sailed, from positions that
  land days late) and the searoute lane ahead to their destination, and the ports they call
  at, those with ships alongside ringed (no tiles: a lon/lat plane with a graticule, like the
  Vehicles page);
- ports with ships in dock;
- the backlog waiting on board per ship: what is known held now, the peak, the mean delay to
  upload, an estimate for ships at sea, and the held records hour by hour;
- alerts: the shipping alerts of the `alerts` topic (container alarms sent live by satellite
  are counted per ship in the backlog table);
- a container's timeline across ships: with an owner token (typed here, kept in the session)
  the owner's containers, one's legs ship by ship with its port events and readings. The
  token goes to the owner routes only; the page never shows another owner's boxes.

All of it from the API (`/v1/shipping/...`). What is down (the API, Kafka, no run yet) is said
with the command that starts it.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd
import pydeck as pdk
import streamlit as st

from core.contracts import topics
from ui.client import ApiClient, ApiError, ApiUnavailable
from ui.layers import PIXELS, dots, labels, paths, rings
from ui.sections.alerts import evidence_lines
from ui.sections.vehicles import HEIGHT_PX, fit, graticule
from ui.view import REFRESH_S, fmt_ms, fmt_num, run_picker

POSITIONS = topics.SHIPPING_POSITIONS.name
SCENARIO_FILE = "config/scenarios/shipping.yaml"
START_RUN = f"streamsim simulate {SCENARIO_FILE}"
JOB = "shipping"
OWNER_TOKEN_KEY = "shipping-owner-token"
RUN_KEY = "shipping-run"
SHOWN_RUN_KEY = "shipping-shown-run"  # the run the fleet shows; the timeline keeps to it
BOX_KEY = "shipping-box"
STATUS_COLORS = {
    "at_sea": [30, 120, 220, 230],
    "in_port": [20, 150, 90, 230],
    "unknown": [140, 140, 140, 200],
}
SHIP_PALETTE = (
    [31, 119, 180],
    [255, 127, 14],
    [44, 160, 44],
    [148, 103, 189],
    [140, 86, 75],
    [227, 119, 194],
    [23, 190, 207],
    [188, 189, 34],
)


def render(client: ApiClient) -> None:
    st.header("Shipping")
    st.caption(
        "Ships hold what they log at sea and upload it in the next port: a voyage's data "
        "lands days late, in bulk. Live: the satellite slice (a position every few hours, "
        "alarms) and the port events."
    )
    _fleet(client)
    st.subheader("Alerts")
    _alerts(client)
    st.subheader("Container timeline")
    _container(client)


# -- what is down ----------------------------------------------------------------------------


def down(exc: Exception) -> None:
    """What is down, and the command that starts it (never a traceback)."""
    if isinstance(exc, ApiUnavailable):
        st.error(
            f"**API down** ({exc.reason}) at `{exc.url}`. Start it with `streamsim api`.",
            icon=":material/cloud_off:",
        )
    elif isinstance(exc, ApiError) and exc.status == 503:
        st.error(
            f"**Kafka not set up for the API**: {exc}. Start Kafka with `streamsim kafka up`, "
            "then `streamsim api` with the stack config.",
            icon=":material/cloud_off:",
        )
    else:
        st.error(f"**Reading shipping failed**: {exc}", icon=":material/error:")


def feed_problem(source: dict[str, Any]) -> str | None:
    """The shipping feed's error, said with the command that starts Kafka; None if fine."""
    error = source.get("error")
    if not error:
        return None
    return f"**Kafka unreachable** ({error}). Start it with `streamsim kafka up`."


# -- the fleet: figures, map, ports, backlog -------------------------------------------------


def unwrap(path: list[list[float]]) -> list[list[float]]:
    """A [lon, lat] path without jumps across the antimeridian (lon continues past ±180)."""
    out: list[list[float]] = []
    shift = 0.0
    for lon, lat in path:
        if out:
            step = lon + shift - out[-1][0]
            if step > 180:
                shift -= 360
            elif step < -180:
                shift += 360
        out.append([lon + shift, lat])
    return out


def ship_color(i: int, alpha: int = 255) -> list[int]:
    return [*SHIP_PALETTE[i % len(SHIP_PALETTE)], alpha]


def map_layers(fleet: dict[str, Any]) -> tuple[list[pdk.Layer], list[dict[str, Any]]]:
    """The deck's layers, and every plotted point (for the fit)."""
    ships, tracks, lanes = [], [], []
    for i, ship in enumerate(fleet["ships"]):
        pos = ship.get("position")
        if pos is None:
            continue
        track = unwrap(ship["track"])
        if len(track) >= 2:
            tracks.append({"ship_id": ship["ship_id"], "path": track, "color": ship_color(i)})
        if ship["lane"]:
            lanes.append({"ship_id": ship["ship_id"], "path": unwrap(ship["lane"])})
        ships.append(
            {
                "ship_id": ship["ship_id"],
                "lon": track[-1][0] if track else pos["lon"],
                "lat": pos["lat"],
                "status": ship["status"].replace("_", " "),
                "where": f"alongside {ship['port']}"
                if ship["status"] == "in_port"
                else f"bound for {pos.get('dest_port') or '?'}",
                "sog": fmt_num(pos.get("sog_kn"), 1),
                "aboard": ship["boxes_aboard"],
                "color": STATUS_COLORS.get(ship["status"], STATUS_COLORS["unknown"]),
            }
        )
    ports = [
        {
            "port": p["port"],
            "lon": p["lon"],
            "lat": p["lat"],
            "label": f"{p['name'] or p['port']} ({p['port']})"
            + (f" · {len(p['ships_in_dock'])} in dock" if p["ships_in_dock"] else ""),
            "docked": len(p["ships_in_dock"]),
        }
        for p in fleet["ports"]
        if p["lon"] is not None and p["lat"] is not None
    ]
    docked = [p for p in ports if p["docked"]]
    points = ships + ports + [{"lon": x, "lat": y} for t in tracks for x, y in t["path"]]
    layers = [
        paths("sea-lanes", lanes, [120, 120, 120, 140], 2, get_dash_array=[4, 3]),
        paths("tracks", tracks, "color", 3, pickable=True),
        dots("ports", ports, 4, [90, 90, 90, 220]),
        rings("docks", docked, 11, [20, 150, 90, 255], 2),
        labels("port-names", ports, "label", 12, [70, 70, 70, 230], [8, 0]),
        dots(
            "ships",
            ships,
            7,
            "color",
            stroked=True,
            get_line_color=[255, 255, 255, 230],
            get_line_width=1,
            line_width_units=PIXELS,
            pickable=True,
        ),
    ]
    return layers, points


def deck(fleet: dict[str, Any]) -> pdk.Deck:
    layers, points = map_layers(fleet)
    lon, lat, zoom = fit(points)
    return pdk.Deck(
        layers=[
            paths("graticule", graticule(lon, lat, zoom), [128, 128, 128, 50], 1),
            *layers,
        ],
        views=[pdk.View(type="OrthographicView", controller=True, flip_y=False)],
        initial_view_state=pdk.ViewState(target=[lon, lat, 0], zoom=zoom),
        map_provider=None,
        map_style=None,
        tooltip={"text": "{ship_id} {status} {where}\n{sog} kn · {aboard} boxes aboard"},
    )


def backlog_table(ships: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "ship": s["ship_id"],
                "status": s["status"].replace("_", " "),
                "port": s["port"] or "—",
                "boxes aboard": s["boxes_aboard"],
                "held now": s["held_now"],
                "waiting (est.)": s["waiting_est"],
                "peak held": s["peak_held"],
                "satellite alarms": s["satellite_alarms"],
                "mean delay h": s["mean_delay_h"],
                "last upload (UTC)": fmt_ms(s["last_upload"]),
            }
            for s in ships
        ]
    )


def backlog_chart(points: list[dict[str, Any]]) -> Any:
    frame = pd.DataFrame(points, columns=["ship_id", "time", "held"])
    frame["time"] = pd.to_datetime(frame["time"], unit="ms")
    return (
        alt.Chart(frame)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("time:T", title=None),
            y=alt.Y("held:Q", title="records held on board"),
            color=alt.Color("ship_id:N", legend=alt.Legend(orient="top", title=None)),
            tooltip=["ship_id", alt.Tooltip("time:T", format="%Y-%m-%d %H:%M"), "held"],
        )
        .properties(height=240)
    )


@st.fragment(run_every=REFRESH_S * 2)
def _fleet(client: ApiClient) -> None:
    try:
        fleet = client.shipping_fleet(run=st.session_state.get(RUN_KEY) or None)
    except (ApiUnavailable, ApiError) as exc:
        down(exc)
        return
    problem = feed_problem(fleet["source"])
    if problem:
        st.error(problem, icon=":material/cloud_off:")
    ships = fleet["ships"]
    if not ships:
        st.info(
            f"No ship on `{POSITIONS}` yet. Start a run: `{START_RUN}` (or "
            "`streamsim demo --scenario shipping`)."
        )
        return
    runs = [r["run"] for r in fleet["runs"]]
    run_picker(runs, RUN_KEY, "ship ids")
    st.session_state[SHOWN_RUN_KEY] = fleet["run"]
    st.caption(f"Run `{fleet['run']}` · {len(runs)} runs read")
    at_sea = sum(s["status"] == "at_sea" for s in ships)
    cols = st.columns(6)
    cols[0].metric("Ships", fmt_num(len(ships)))
    cols[1].metric("At sea", fmt_num(at_sea))
    cols[2].metric("In port", fmt_num(sum(s["status"] == "in_port" for s in ships)))
    cols[3].metric("Onboard records landed", fmt_num(sum(s["onboard_records"] for s in ships)))
    cols[4].metric("Feed lag (records)", fmt_num(fleet["source"]["lag"]))
    cols[5].metric("Run clock (UTC)", fmt_ms(fleet["shore_now"])[5:16])

    left, right = st.columns([3, 2])
    with left:
        st.pydeck_chart(
            deck(fleet),
            height=HEIGHT_PX,
            key="shipping-map",
            alt="Ships at their newest positions with their tracks and sea lanes, and ports.",
        )
        st.markdown(
            "  \n".join(
                f"`{s['ship_id']}` "
                + (
                    f"alongside {s['port']}"
                    if s["status"] == "in_port"
                    else f"at sea, from {s['port'] or '?'} to "
                    f"{(s['position'] or {}).get('dest_port') or '?'}"
                )
                + f" · {s['boxes_aboard']} boxes aboard"
                for s in ships
            )
        )
        st.caption(
            ":blue[●] at sea · :green[●] in port · coloured lines: each ship's track (its "
            "positions, most landing days late) · dashed: the sea lane to its destination · "
            ":green[○] ports with ships in dock."
        )
    with right:
        st.markdown("**Ports with ships in dock**")
        docked = [p for p in fleet["ports"] if p["ships_in_dock"]]
        if docked:
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            "port": p["port"],
                            "name": p["name"] or "—",
                            "ships in dock": ", ".join(p["ships_in_dock"]),
                        }
                        for p in docked
                    ]
                ),
                hide_index=True,
                width="stretch",
            )
        else:
            st.caption("No ship alongside at the run's clock: all at sea.")
        st.caption(f"Ports called or bound for: {', '.join(p['port'] for p in fleet['ports'])}")

    st.subheader("Backlog waiting on board")
    st.dataframe(backlog_table(ships), hide_index=True, width="stretch")
    if fleet["backlog"]:
        st.altair_chart(backlog_chart(fleet["backlog"]), width="stretch")
    st.caption(
        "Held: records logged on board, between their event time and their upload in port "
        "(known once they land). Waiting (est.): for a ship at sea, its onboard rate times the "
        "hours since its last upload; its voyage lands at the next port."
    )


# -- alerts ----------------------------------------------------------------------------------


@st.fragment(run_every=REFRESH_S * 2)
def _alerts(client: ApiClient) -> None:
    try:
        got = client.shipping_alerts(limit=20)
    except (ApiUnavailable, ApiError) as exc:
        down(exc)
        return
    alerts = got["alerts"]
    st.markdown(f"**Shipping alerts** ({got['count']}, newest first)")
    if not alerts:
        st.caption(
            f"None yet: the `{JOB}` job writes them to `alerts` (`streamsim pipeline run {JOB}`)."
        )
    for alert in alerts[:8]:
        evidence = alert.get("evidence") or {}
        late_by = alert.get("late_by_ms")
        late = (
            (f" · late by {late_by / 3_600_000:,.1f} h" if isinstance(late_by, int) else " · late")
            if alert.get("late")
            else ""
        )
        with st.container(border=True):
            st.markdown(
                f"**{alert.get('label') or alert['rule']}** · `{alert.get('entity_id')}` · "
                f"{alert['rule']}{late}  \nevent time "
                f"{fmt_ms(alert.get('event_time'))} · detected "
                f"{fmt_ms(alert.get('detected_at'))} UTC"
            )
            st.code("\n".join(evidence_lines(evidence)), language=None)
    st.caption(
        "Container alarms sent live by satellite (temperature, door, shock): per ship in the "
        "backlog table above."
    )


# -- a container's timeline (owner token) ----------------------------------------------------


def legs_chart(box: dict[str, Any]) -> Any:
    legs = pd.DataFrame(
        [
            {
                "ship": leg["ship_id"],
                "voyage": leg["voyage_id"],
                "from": leg["first_event_time"],
                "to": leg["last_event_time"],
                "route": f"{leg['loaded_at'] or '?'} → {leg['unloaded_at'] or '?'}",
                "readings": leg["readings"],
                "alarms": leg["alarms"],
            }
            for leg in box["legs"]
            if leg["first_event_time"] is not None
        ]
    )
    for col in ("from", "to"):
        legs[col] = pd.to_datetime(legs[col], unit="ms")
    bars = (
        alt.Chart(legs)
        .mark_bar(height=18, cornerRadius=3)
        .encode(
            x=alt.X("from:T", title=None),
            x2="to:T",
            y=alt.Y("ship:N", title=None, sort=None),
            color=alt.Color("ship:N", legend=None),
            tooltip=["ship", "voyage", "route", "readings", "alarms", "from:T", "to:T"],
        )
    )
    text = (
        alt.Chart(legs)
        .mark_text(align="left", dx=4, dy=-14, fontSize=11)
        .encode(x="from:T", y=alt.Y("ship:N", sort=None), text="route")
    )
    return alt.layer(bars, text).properties(height=60 + 40 * len(legs))


def _owner_label(row: dict[str, Any]) -> str:
    last = row.get("last_reading") or {}
    return f"{row['container_id']} · {row.get('cargo') or '?'} · {row['legs_count']} legs" + (
        f" · on {last['ship_id']}" if last.get("ship_id") else ""
    )


def _container(client: ApiClient) -> None:
    token = st.text_input(
        "Owner token",
        type="password",
        key=OWNER_TOKEN_KEY,
        help="A container owner's token (STREAMSIM_OWNER_TOKENS): you see that owner's "
        "containers only.",
    )
    if not token:
        st.caption(
            "Type an owner token to see that owner's containers and a container's history "
            "across ships."
        )
        return
    try:
        mine = client.owner_containers(token, run=st.session_state.get(SHOWN_RUN_KEY))
    except ApiUnavailable as exc:
        down(exc)
        return
    except ApiError as exc:
        if exc.status == 401:
            st.error("Not an owner token.", icon=":material/lock:")
        elif exc.status == 403:
            st.error(
                f"Owner routes are off: {exc.detail}. Set STREAMSIM_OWNER_TOKENS_FILE (or "
                "STREAMSIM_OWNER_TOKENS) and restart `streamsim api`.",
                icon=":material/lock:",
            )
        else:
            down(exc)
        return
    rows = mine["containers"]
    st.caption(
        f"Owner **{mine['owner']}**: {fmt_num(mine['matched'])} containers seen"
        + (f" in run `{shown}`" if (shown := st.session_state.get(SHOWN_RUN_KEY)) else "")
        + (
            f" · feed {fmt_num(mine['source']['lag'])} records behind"
            if mine["source"]["lag"]
            else ""
        )
    )
    if not rows:
        st.info(f"None of {mine['owner']}'s containers seen yet. Start a run: `{START_RUN}`.")
        return
    rows.sort(key=lambda r: (-r["legs_count"], r["container_id"]))
    by_id = {r["container_id"]: r for r in rows}
    chosen = st.selectbox(
        "Container",
        list(by_id),
        key=BOX_KEY,
        format_func=lambda c: _owner_label(by_id[c]),
        help="Those with the most legs (transshipped across ships) first.",
    )
    try:
        box = client.owner_container(token, str(chosen))
    except (ApiUnavailable, ApiError) as exc:
        down(exc)
        return
    ships = list(dict.fromkeys(leg["ship_id"] for leg in box["legs"]))
    st.markdown(
        f"**Timeline of `{box['container_id']}`** — {box.get('cargo') or '?'}"
        + (" (reefer)" if box.get("reefer") else "")
        + f", to {box.get('final_port') or '?'}, across {len(ships)} ships: {', '.join(ships)}"
    )
    if any(leg["first_event_time"] is not None for leg in box["legs"]):
        st.altair_chart(legs_chart(box), width="stretch")
    left, right = st.columns(2)
    with left:
        st.markdown("**Port events**")
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "time (UTC)": fmt_ms(e["event_time"]),
                        "event": e["event"],
                        "port": e["port"],
                        "ship": e["ship_id"],
                    }
                    for e in box["port_events"]
                ],
                columns=["time (UTC)", "event", "port", "ship"],
            ),
            hide_index=True,
            width="stretch",
        )
    with right:
        st.markdown("**Newest readings**")
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "time (UTC)": fmt_ms(r["event_time"]),
                        "ship": r["ship_id"],
                        "temp °C": r["temp_c"],
                        "door": "open" if r["door_open"] else "shut",
                        "alarm": r["alarm"],
                        "channel": r["channel"],
                        "landed": fmt_ms(r["emitted_at"]),
                    }
                    for r in reversed(box["readings"])
                ]
            ),
            hide_index=True,
            width="stretch",
        )
