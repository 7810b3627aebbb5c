"""The estimated device clock offsets on the Vehicles and Sensors pages: a device's offset beside
its readings, and the fleet's offset histogram (from `/v1/vehicles/clock-offsets` and
`/v1/sensors/clock-offsets`, the compacted `<domain>.clock-offsets` topics the jobs write when
they window on corrected time: docs/clock.md)."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from ui.client import ApiClient
from ui.view import api_errors, fmt_ms, fmt_num


def fmt_offset(ms: int | float | None) -> str:
    """A clock offset, signed, in s (min or h when large).

    >>> fmt_offset(1_234), fmt_offset(-61_500), fmt_offset(0), fmt_offset(None)
    ('+1.2 s', '-1.0 min', '+0.0 s', '—')
    >>> fmt_offset(-830_000_000_000)
    '-230555.6 h'
    """
    if ms is None:
        return "—"
    sign = "-" if ms < 0 else "+"
    s = abs(ms) / 1000
    if s >= 3600:
        return f"{sign}{s / 3600:.1f} h"
    if s >= 60:
        return f"{sign}{s / 60:.1f} min"
    return f"{sign}{s:.1f} s"


def offset_text(clock: dict[str, Any] | None, domain: str) -> str:
    """The line beside a device's readings.

    >>> offset_text({"offset_estimate_ms": -4200, "reset": False, "records": 30,
    ...     "as_of": 1772524860000}, "vehicles")
    'Clock offset -4.2 s (its clock runs behind; estimated over 30 records, as of 2026-03-03 08:01:00 UTC)'
    >>> offset_text(None, "sensors")[:40]
    'Clock offset: no estimate yet (the senso'
    """  # noqa: E501
    if clock is None:
        return (
            f"Clock offset: no estimate yet (the {domain} job publishes them on "
            f"`{domain}.clock-offsets` when it runs on corrected time)"
        )
    ms = clock["offset_estimate_ms"]
    if clock.get("reset"):
        how = "its clock is reset to an epoch"
    else:
        how = "its clock runs ahead" if ms > 0 else "its clock runs behind" if ms < 0 else "on time"
    records = clock.get("records")
    over = f"over {fmt_num(records)} records, " if records is not None else ""
    return (
        f"Clock offset {fmt_offset(ms)} ({how}; estimated {over}as of {fmt_ms(clock['as_of'])} UTC)"
    )


def histogram_frame(body: dict[str, Any]) -> pd.DataFrame:
    """The histogram's bins as rows: low_s, high_s, devices, label.

    >>> histogram_frame({"bins": [{"low_s": -5.0, "high_s": 0.0, "devices": 2}]})["label"][0]
    '-5 to 0 s'
    """
    rows = [{**b, "label": f"{b['low_s']:g} to {b['high_s']:g} s"} for b in body.get("bins") or []]
    return pd.DataFrame(rows, columns=["low_s", "high_s", "devices", "label"])


def histogram_chart(frame: pd.DataFrame, what: str) -> alt.Chart:
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("low_s:Q", bin="binned", title="estimated clock offset (s, device - true)"),
            x2="high_s:Q",
            y=alt.Y("devices:Q", title=what),
            tooltip=[alt.Tooltip("label:N", title="offset"), alt.Tooltip("devices:Q")],
        )
        .properties(height=180)
    )


def histogram_caption(body: dict[str, Any], what: str) -> str:
    """The line above the histogram.

    >>> histogram_caption({"devices": 3, "in_reset": 1, "p50_ms": 2000,
    ...     "max_abs_ms": 61000, "bin_s": 5.0}, "vehicles")
    '3 vehicles · median +2.0 s · largest ±1.0 min · 1 with a clock reset (not counted) · 5 s bins'
    """
    return (
        f"{fmt_num(body['devices'])} {what} · median {fmt_offset(body['p50_ms'])} · "
        f"largest ±{fmt_offset(body['max_abs_ms']).lstrip('+')}"
        + (
            f" · {fmt_num(body['in_reset'])} with a clock reset (not counted)"
            if body["in_reset"]
            else ""
        )
        + f" · {body['bin_s']:g} s bins"
    )


def render_histogram(client: ApiClient, domain: str, what: str) -> None:
    """The fleet's offset histogram, or why there is none."""
    st.subheader("Clock offsets")
    with api_errors("Reading the clock offsets"):
        body = client.clock_offsets(domain)
        source = body["source"]
        if source.get("error"):
            st.error(f"Cannot read `{source['topic']}`: {source['error']}")
        if not body["devices"]:
            st.info(
                f"No clock offset on `{source['topic']}` yet: the {domain} job publishes "
                f"each device's estimate there when it windows on corrected time "
                f"(`clock.time: corrected_event_time`)."
            )
            return
        st.caption(histogram_caption(body, what))
        st.altair_chart(histogram_chart(histogram_frame(body), what), width="stretch")
