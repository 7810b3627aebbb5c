"""What every page shares: the API client of the session, error boxes, time and number formats."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import streamlit as st

from ui.client import ApiClient, ApiError, ApiUnavailable

REFRESH_S = 2.0
#: A run's or a load test's status, as a coloured dot.
STATUS_ICONS = {
    "running": ":green[●]",
    "stopping": ":orange[●]",
    "finished": ":blue[●]",
    "failed": ":red[●]",
    "stopped": ":gray[●]",
}


@st.cache_resource
def client() -> ApiClient:
    """One client per server process (it holds a connection pool; the settings come from the
    environment, the same for every session)."""
    return ApiClient()


@contextlib.contextmanager
def api_errors(what: str) -> Iterator[None]:
    """Show a failed API call as an error box (the rest of the page still renders)."""
    try:
        yield
    except ApiUnavailable as exc:
        st.error(f"**API down** — {exc}", icon=":material/cloud_off:")
    except ApiError as exc:
        st.error(f"**{what} failed** (HTTP {exc.status}): {exc}", icon=":material/error:")


def fmt_ms(ms: Any) -> str:
    """Epoch ms as UTC `YYYY-MM-DD HH:MM:SS`; '—' for nothing."""
    if not isinstance(ms, int | float):
        return "—"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def fmt_rate(value: Any) -> str:
    if not isinstance(value, int | float):
        return "—"
    if value >= 10_000:
        return f"{value / 1000:,.1f}k/s"
    return f"{value:,.1f}/s" if value < 100 else f"{value:,.0f}/s"


def fmt_duration(seconds: float | None) -> str:
    """Seconds as s, min, h or days, whichever reads best ("—" for none)."""
    if seconds is None:
        return "—"
    if abs(seconds) < 120:
        return f"{seconds:,.1f} s"
    if abs(seconds) < 7200:
        return f"{seconds / 60:,.1f} min"
    if abs(seconds) < 2 * 86_400:
        return f"{seconds / 3600:,.1f} h"
    return f"{seconds / 86_400:,.1f} days"


def fmt_num(value: Any, digits: int = 0) -> str:
    if not isinstance(value, int | float):
        return "—"
    return f"{value:,.{digits}f}"


def compact(value: Any, limit: int = 300) -> str:
    """A value as one line of JSON, cut at `limit` characters."""
    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def masked(last4: Any) -> str:
    """How a card shows anywhere in the UI: its last 4 digits only."""
    return f"•••• {last4}" if isinstance(last4, str) else "—"


def run_picker(runs: list[str], key: str, reused: str) -> None:
    """A "Run" picker (session key `key`, "" for the newest) when more than one run was read;
    `reused` says which ids a rerun reuses, so why runs are shown apart."""
    if len(runs) > 1:
        st.selectbox(
            "Run",
            ["", *runs],
            key=key,
            format_func=lambda r: r or f"the newest ({runs[0]})",
            help=f"A rerun reuses {reused}: each run is shown on its own.",
        )
