"""Alerts page: what the pipeline's detectors raised (the `alerts` topic) and what the fraud
endpoint declined or sent to review, each with its evidence.

The pipeline's alerts are the ones recent when the page opened, and above them, in the browser,
each new one as it lands (`ui.live_feed`: an EventSource on `/v1/stream/alerts`, started after
the stream position read before the snapshot, so none falls between the two)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from ui import live_feed
from ui.client import ApiClient, ApiError
from ui.view import REFRESH_S, api_errors, fmt_ms, fmt_num, masked

TIME_KEYS = ("event_time", "decided_at", "detected_at", "at")


def render(client: ApiClient) -> None:
    st.header("Alerts")
    limit = st.columns(3)[0].select_slider(
        "Show at most", [10, 25, 50, 100], value=25, key="alerts-limit"
    )
    pipeline, endpoint = st.columns(2)
    with pipeline:
        st.subheader("Pipeline detectors")
        _pipeline_alerts(client, int(limit))
    with endpoint:
        st.subheader("Fraud endpoint")
        _endpoint_flags(client, int(limit))


def evidence_lines(evidence: Any, depth: int = 0) -> list[str]:
    """Evidence as indented `key: value` lines (numbers rounded), nested mappings indented."""
    if not isinstance(evidence, dict):
        return [f"{'  ' * depth}{evidence}"]
    lines = []
    for key, value in evidence.items():
        if isinstance(value, dict):
            lines.append(f"{'  ' * depth}{key}:")
            lines.extend(evidence_lines(value, depth + 1))
        elif isinstance(value, list):
            shown = ", ".join(str(v) for v in value[:6]) + (" …" if len(value) > 6 else "")
            lines.append(f"{'  ' * depth}{key}: [{shown}]")
        elif key in TIME_KEYS and isinstance(value, int):
            lines.append(f"{'  ' * depth}{key}: {fmt_ms(value)} UTC")
        elif isinstance(value, float):
            lines.append(f"{'  ' * depth}{key}: {value:,.3f}".rstrip("0").rstrip("."))
        else:
            lines.append(f"{'  ' * depth}{key}: {value}")
    return lines


def stream_position(client: ApiClient) -> str | None:
    """The alerts stream's position now ("" before its topic exists); None for an API
    without the streams."""
    try:
        position = client.stream_status()["alerts"]["position"]
    except ApiError:
        return None
    return str(position)


def _pipeline_alerts(client: ApiClient, limit: int) -> None:
    with api_errors("Reading alerts"):
        position = stream_position(client)
        feed = client.alerts(limit=limit)
        alerts = feed["alerts"]
        if position is not None:
            st.caption("New alerts appear here as they land, with no page refresh.")
            live_feed.show(
                live_feed.feed_html(
                    live_feed.browser_api_url(client.base_url),
                    limit=limit,
                    after=position or None,
                    skip=live_feed.alert_ids(alerts),
                    backlog=limit,
                ),
                height=320,
            )
        if not alerts:
            source = feed["source"]
            st.info(
                ("No alerts when the page opened" if position is not None else "No alerts yet")
                + (
                    f" (following {source['partitions']} partitions of `{source['topic']}`)."
                    if source["partitions"]
                    else f": `{source['topic']}` has not been created by a pipeline job yet."
                )
            )
            return
        st.caption(f"{len(alerts)} most recent when the page opened, newest first.")
        for alert in alerts:
            with st.container(border=True):
                st.markdown(
                    f"**{alert['rule']}**"
                    + (f" · label `{alert['label']}`" if alert.get("label") else "")
                    + f" · entity `{_entity(alert.get('entity_id'))}`  \n"
                    f"event time {fmt_ms(alert.get('event_time'))} · detected "
                    f"{fmt_ms(alert.get('detected_at'))} UTC · {alert.get('job') or '?'}"
                )
                st.code("\n".join(evidence_lines(alert.get("evidence") or {})), language=None)
                ids = alert.get("event_ids") or []
                if ids:
                    st.caption(f"events: {', '.join(ids[:5])}{' …' if len(ids) > 5 else ''}")


def _entity(entity: Any) -> str:
    text = str(entity or "?")
    return text if len(text) <= 24 else text[:20] + "…"


@st.fragment(run_every=REFRESH_S)
def _endpoint_flags(client: ApiClient, limit: int) -> None:
    with api_errors("Reading decisions"):
        feed = client.activity(limit=500)
        flagged = [r for r in feed["activity"] if r.get("decision") in ("decline", "review")]
        if not flagged:
            st.info("No declined or reviewed transactions among the recent decisions.")
            return
        st.caption(f"{len(flagged[:limit])} most recent declines and reviews, newest first.")
        for row in flagged[:limit]:
            with st.container(border=True):
                st.markdown(
                    f"**{row['decision'].upper()}** {masked(row.get('card_last4'))} · score "
                    f"{fmt_num(row.get('score'), 2)} · "
                    f"{', '.join(row.get('reasons') or []) or 'no reason'}  \n"
                    f"{fmt_num(row.get('amount'), 2)} {row.get('currency') or ''} at "
                    f"`{row.get('merchant_id')}` in {row.get('country')} · event time "
                    f"{fmt_ms(row.get('event_time'))} UTC"
                )
                st.code("\n".join(evidence_lines(fired_evidence(row))), language=None)


def fired_evidence(row: dict[str, Any]) -> dict[str, Any]:
    """The evidence of the rules that fired (both rules' when none did)."""
    evidence = dict(row.get("evidence") or {})
    reasons = set(row.get("reasons") or [])
    rules = (("travel", "impossible_travel"), ("velocity", "velocity"))
    keys = [key for key, rule in rules if rule in reasons]
    return {k: evidence[k] for k in keys or ("travel", "velocity") if evidence.get(k)}
