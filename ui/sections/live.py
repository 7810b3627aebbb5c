"""Live page: records/s per topic, the pipeline's watermarks and late drops, the endpoint's
counters. Refreshes itself every few seconds; below the pipeline, in the browser, each new
alert and job report as it lands (`ui.live_feed`, server-sent events).

A query whose last report is older than `ui.status.STALE_S` is shown stale, with its report's
age: the feed keeps a stopped job's last reports, and its rows/s are not today's."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from core.contracts.topics import is_truth
from ui import live_feed
from ui.client import ApiClient
from ui.sections import sketches
from ui.status import STALE_S
from ui.view import REFRESH_S, api_errors, fmt_duration, fmt_ms, fmt_num, fmt_rate


def render(client: ApiClient) -> None:
    st.header("Live")
    show_truth = st.toggle("Show truth topics", value=False, key="live-truth")
    _rates(client, show_truth)
    st.subheader("Pipeline")
    _pipeline(client)
    st.caption("Job reports and new alerts as they land (no page refresh):")
    live_feed.show(
        live_feed.feed_html(
            live_feed.browser_api_url(client.base_url),
            limit=5,
            backlog=5,
            progress=True,
            stale_s=STALE_S,
        ),
        height=260,
    )
    sketches.render(client)
    st.subheader("Fraud endpoint")
    _endpoint(client)


def _visible(topic: str, show_truth: bool) -> bool:
    return show_truth or not is_truth(topic)


@st.fragment(run_every=REFRESH_S)
def _rates(client: ApiClient, show_truth: bool) -> None:
    with api_errors("Reading rates"):
        rates = client.rates()
        topics = [t for t in rates["topics"] if _visible(t["topic"], show_truth)]
        if not topics:
            st.info("No topics yet: start a run on the Runs page, or post a transaction.")
            return
        total = sum(t["records_per_s"] or 0.0 for t in topics)
        busiest = sorted(topics, key=lambda t: t["records_per_s"] or 0.0, reverse=True)[:4]
        cols = st.columns(1 + len(busiest))
        cols[0].metric("All topics", fmt_rate(total), border=True)
        for col, topic in zip(cols[1:], busiest, strict=True):
            col.metric(topic["topic"], fmt_rate(topic["records_per_s"]), border=True)
        _rate_chart(rates["history"], show_truth)
        st.table(
            pd.DataFrame(
                [
                    {
                        "topic": t["topic"],
                        "records/s": fmt_rate(t["records_per_s"]),
                        "records in topic": fmt_num(t["end_offset"]),
                    }
                    for t in topics
                ]
            ).set_index("topic")
        )
        st.caption(
            f"Sampled every {rates['interval_s']:g} s from the topics' end offsets; "
            f"latest {fmt_ms(rates['sampled_at'])} UTC."
            + (f" Kafka: {rates['error']}" if rates.get("error") else "")
        )


def _rate_chart(history: list[dict[str, Any]], show_truth: bool) -> None:
    rows = [
        {"time": pd.to_datetime(sample["at"], unit="ms"), "topic": topic, "records/s": rate}
        for sample in history
        for topic, rate in sample["rates"].items()
        if _visible(topic, show_truth)
    ]
    if not rows:
        return
    frame = pd.DataFrame(rows)
    active = frame.groupby("topic")["records/s"].max()
    frame = frame[frame["topic"].isin(active[active > 0].index)]
    if frame.empty:
        st.caption("All topics idle over the last two minutes.")
        return
    chart = (
        alt.Chart(frame)
        .mark_line(interpolate="monotone")
        .encode(
            x=alt.X("time:T", title=None),
            y=alt.Y("records/s:Q"),
            color=alt.Color("topic:N", legend=alt.Legend(orient="bottom")),
            tooltip=["topic", "records/s", alt.Tooltip("time:T", format="%H:%M:%S")],
        )
        .properties(height=220)
    )
    st.altair_chart(chart, width="stretch")


@st.fragment(run_every=REFRESH_S)
def _pipeline(client: ApiClient) -> None:
    with api_errors("Reading pipeline progress"):
        view = client.pipeline()
        queries = view["queries"]
        if not queries:
            st.info(
                "No pipeline progress on the `metrics` topic yet: start a job with "
                "`streamsim pipeline run JOB`."
            )
            return
        # Late input rows counted once per job (its queries read the same input).
        jobs = view.get("jobs") or []
        dropped = sum(j["late_events_seen"] for j in jobs)
        current = [q for q in queries if not is_stale(q)]
        if len(current) < len(queries):
            st.warning(stale_note(queries, len(current)), icon=":material/history:")
        cols = st.columns(3)
        cols[0].metric("Queries reporting", len(current), border=True)
        cols[1].metric(
            "Rows processed/s",
            fmt_rate(sum(q.get("processed_rows_per_s") or 0.0 for q in current))
            if current
            else "stopped",
            border=True,
            help="Of the queries reporting now; a stale query's last rate is in the table.",
        )
        cols[2].metric("Late rows dropped (seen)", fmt_num(dropped), border=True)
        st.table(
            pd.DataFrame(
                [
                    {
                        "query": q["query"],
                        "job": q.get("job") or "—",
                        "mode": q.get("mode") or "—",
                        "batch": fmt_num(q.get("batch_id")),
                        "input rows/s": fmt_rate(q.get("input_rows_per_s")),
                        "processed rows/s": fmt_rate(q.get("processed_rows_per_s")),
                        "watermark (UTC)": fmt_ms(q.get("watermark_ms")),
                        "watermark behind newest": fmt_duration(q.get("watermark_behind_newest_s")),
                        "behind topic end (records)": fmt_num(q.get("offsets_behind")),
                        "late drops (last batch)": fmt_num(
                            _first(q.get("late_events"), q.get("dropped_by_watermark"))
                        ),
                        "late drops (seen)": fmt_num(
                            _first(q.get("late_events_seen"), q.get("dropped_by_watermark_seen"))
                        ),
                        "last report": report_state(q),
                    }
                    for q in queries
                ]
            ).set_index("query")
        )
        st.caption(
            "Watermark behind newest: the newest event time the batch read minus the "
            "watermark, on the stream's own clock (simulated or not). Behind topic end: "
            "records between the batch's end offsets and the topics' latest."
        )


@st.fragment(run_every=REFRESH_S)
def _endpoint(client: ApiClient) -> None:
    with api_errors("Reading endpoint stats"):
        stats = client.stats()
        decisions = stats["decisions"]
        latency = stats["latency_ms"]
        cols = st.columns(5)
        cols[0].metric("Requests", fmt_num(stats["requests"]), border=True)
        cols[1].metric("Declined", fmt_num(decisions.get("decline")), border=True)
        cols[2].metric("Review", fmt_num(decisions.get("review")), border=True)
        cols[3].metric("p50 handling", _ms(latency.get("p50")), border=True)
        cols[4].metric("p99 handling", _ms(latency.get("p99")), border=True)
        publish = stats["publish"]
        st.caption(
            f"Published {fmt_num(publish['delivered'])}, failed {fmt_num(publish['failed'])}, "
            f"queued {fmt_num(publish['queued'])}; state {stats['state']['status']} with "
            f"{fmt_num(stats['state']['cards'])} cards; up {fmt_num(stats['uptime_s'])} s."
        )


def is_stale(query: dict[str, Any]) -> bool:
    """Whether a query's last report is older than `STALE_S` (its job stopped, or stalls)."""
    age = query.get("report_age_s")
    return isinstance(age, int | float) and age > STALE_S


def report_state(query: dict[str, Any]) -> str:
    """ "live, 2.0 s ago" or "STALE, 5.3 min ago" (— when the report has no time)."""
    age = query.get("report_age_s")
    if not isinstance(age, int | float):
        return "—"
    return f"{'STALE' if age > STALE_S else 'live'}, {fmt_duration(age)} ago"


def stale_note(queries: list[dict[str, Any]], current: int) -> str:
    """What the warning above a block with stale queries says."""
    stale = [q for q in queries if is_stale(q)]
    newest = min(float(q["report_age_s"]) for q in stale)
    what = "These figures stopped updating" if current == 0 else f"{len(stale)} queries stopped"
    return (
        f"**{what}**: {len(stale)} of {len(queries)} queries last reported "
        f"{fmt_duration(newest)} ago or earlier (a stopped job's last reports, shown STALE "
        f"below). Rows/s above count only the queries reporting within {STALE_S:.0f} s."
    )


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _ms(value: Any) -> str:
    return "—" if not isinstance(value, int | float) else f"{value:.2f} ms"
