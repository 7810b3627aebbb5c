"""Evaluation page: the newest `streamsim evaluate` report as charts (precision, recall, F1 and
detection latency per label type and path), or a clear note that there is none yet."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from ui.client import ApiClient
from ui.view import api_errors, fmt_ms, fmt_num

NO_EVALUATION = "No evaluation yet"


def scores_frame(report: dict[str, Any]) -> pd.DataFrame:
    """One row per path, label and metric: precision, recall, f1 (None where undefined)."""
    rows = []
    for path, labels in (report.get("paths") or {}).items():
        for label, score in (labels or {}).items():
            for metric in ("precision", "recall", "f1"):
                rows.append(
                    {"path": path, "label": label, "metric": metric, "value": score.get(metric)}
                )
    return pd.DataFrame(rows, columns=["path", "label", "metric", "value"])


def latency_frame(report: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for path, labels in (report.get("paths") or {}).items():
        for label, score in (labels or {}).items():
            latency = score.get("latency_ms") or {}
            for pct in ("p50", "p99"):
                if isinstance(latency.get(pct), int | float):
                    rows.append(
                        {"path": path, "label": label, "percentile": pct, "ms": latency[pct]}
                    )
    return pd.DataFrame(rows, columns=["path", "label", "percentile", "ms"])


def _quality_chart(frame: pd.DataFrame) -> alt.Chart:
    return (
        alt.Chart(frame.dropna(subset=["value"]))
        .mark_bar()
        .encode(
            x=alt.X("label:N", title=None, axis=alt.Axis(labelAngle=0)),
            xOffset="metric:N",
            y=alt.Y("value:Q", scale=alt.Scale(domain=[0, 1]), title=None),
            color=alt.Color("metric:N", legend=alt.Legend(orient="bottom", title=None)),
            tooltip=["label", "metric", alt.Tooltip("value:Q", format=".3f")],
        )
        .properties(height=240)
    )


def _latency_chart(frame: pd.DataFrame) -> alt.Chart:
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("label:N", title=None, axis=alt.Axis(labelAngle=0)),
            xOffset="percentile:N",
            y=alt.Y("ms:Q", scale=alt.Scale(type="symlog"), title="ms (symlog scale)"),
            color=alt.Color("percentile:N", legend=alt.Legend(orient="bottom", title=None)),
            tooltip=["label", "percentile", alt.Tooltip("ms:Q", format=",.0f")],
        )
        .properties(height=220)
    )


def render(client: ApiClient) -> None:
    st.header("Evaluation")
    with api_errors("Reading the latest evaluation"):
        found = client.latest_evaluation()
        if found is None:
            st.info(
                f"**{NO_EVALUATION}.** Run a scenario, then `streamsim evaluate SCENARIO`: it "
                "scores the endpoint's decisions and the pipeline's alerts against the truth and "
                "saves the report where this page finds it.",
                icon=":material/insights:",
            )
            return
        _report(found)


def _report(found: dict[str, Any]) -> None:
    report = found["report"]
    run = report.get("run") or {}
    st.markdown(f"### {report.get('scenario', '?')}")
    st.caption(
        f"`{found['file']}` — written {fmt_ms(found['modified_at'])} UTC"
        + (f" · run `{run.get('id_prefix')}`, {fmt_num(run.get('events'))} events" if run else "")
    )
    labels = {label for labels in (report.get("paths") or {}).values() for label in labels}
    cols = st.columns(4)
    cols[0].metric("Label types scored", len(labels), border=True)
    cols[1].metric("Late events dropped", fmt_num(report.get("late_dropped")), border=True)
    cols[2].metric("Hard-negative alerts", fmt_num(report.get("hard_negative_alerts")), border=True)
    parity = report.get("parity")
    if isinstance(parity, dict):
        cols[3].metric(
            "Batch parity",
            f"{fmt_num(parity.get('matching'))} / {fmt_num(parity.get('windows'))}",
            help=f"{fmt_num(parity.get('explained_by_late'))} differences explained by late data",
            border=True,
        )
    scores = scores_frame(report)
    if scores.empty:
        st.warning("The report scores no label types.")
        return
    st.subheader("Detection quality")
    paths = list(dict.fromkeys(scores["path"]))
    for column, path in zip(st.columns(len(paths)), paths, strict=True):
        with column:
            st.markdown(f"**{path}**")
            st.altair_chart(_quality_chart(scores[scores["path"] == path]), width="stretch")
    latency = latency_frame(report)
    if not latency.empty:
        st.subheader("Detection latency (simulated clock)")
        paths = list(dict.fromkeys(latency["path"]))
        for column, path in zip(st.columns(len(paths)), paths, strict=True):
            with column:
                st.markdown(f"**{path}**")
                st.altair_chart(_latency_chart(latency[latency["path"] == path]), width="stretch")
    table = []
    for path, labels in (report.get("paths") or {}).items():
        for label, score in labels.items():
            latency_ms = score.get("latency_ms") or {}
            table.append(
                {
                    "path": path,
                    "label": label,
                    "precision": fmt_num(score.get("precision"), 3),
                    "recall": fmt_num(score.get("recall"), 3),
                    "f1": fmt_num(score.get("f1"), 3),
                    "support": fmt_num(score.get("support")),
                    "latency p50 (ms)": fmt_num(latency_ms.get("p50")),
                    "latency p99 (ms)": fmt_num(latency_ms.get("p99")),
                }
            )
    st.table(pd.DataFrame(table).set_index(["path", "label"]))
