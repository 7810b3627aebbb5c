"""Load tests page: pick a file under `config/loadtests/`, edit its rate shape, durations and
SLOs, start it; watch the achieved rate and latency percentiles live; read each report with
its Vega-Lite charts. Every earlier report (the panel's and `streamsim loadtest`'s) stays
listed.

The edits are YAML, prefilled with the part of the file the API lets the panel change; the API
merges them over the file and validates the result with the load-test model, so a wrong key or
value comes back naming it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st
import yaml

from ui.client import ApiClient
from ui.view import STATUS_ICONS, api_errors, fmt_ms, fmt_num, fmt_rate

ACTIVE = ("running", "stopping")
SHOWN = "loadtest_report"  # the report shown (its selectbox's key): a new run's once started
LIVE_S = 1.0
NO_RUNS = "No load test yet"


def parse_edits(text: str) -> dict[str, Any]:
    """The edits typed as YAML: a mapping (empty text: no edits). ValueError says what is
    wrong."""
    try:
        value = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise ValueError(f"the edits are not valid YAML: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("the edits must be a mapping of keys (load, warmup_s, duration_s, slo)")
    return value


def edits_text(editable: dict[str, Any]) -> str:
    return yaml.safe_dump(editable, sort_keys=False, default_flow_style=None)


def ms(value: Any) -> str:
    return "—" if not isinstance(value, int | float) else f"{value:,.2f} ms"


def runs_frame(runs: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per load test: what ran, when, and its headline figures."""
    rows = []
    for run in runs:
        summary = run.get("summary") or {}
        latency = summary.get("latency_ms") or {}
        rows.append(
            {
                "run": run["run_id"],
                "status": run["status"],
                "started": fmt_ms(run.get("started_at")),
                "requests": fmt_num(summary.get("requests")),
                "achieved": fmt_rate(summary.get("achieved_rate")),
                "p50": ms(latency.get("p50")),
                "p99": ms(latency.get("p99")),
                "errors": fmt_num(summary.get("errors")),
                "SLOs": None if "ok" not in summary else ("met" if summary["ok"] else "FAILED"),
            }
        )
    return pd.DataFrame(rows)


def slo_frame(report: dict[str, Any]) -> pd.DataFrame:
    rows = [
        {"SLO": name, "threshold": check.get("threshold"), "measured": check.get("measured"),
         "ok": "✓" if check.get("ok") else "✗"}
        for name, check in (report.get("slo") or {}).items()
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=["SLO", "threshold", "measured", "ok"])


def render(client: ApiClient) -> None:
    st.header("Load tests")
    found: dict[str, Any] | None = None
    with api_errors("Listing load-test files"):
        found = client.loadtest_files()
    if found is not None and found["files"]:
        _start_form(client, found["files"])
    elif found is not None:
        st.info("No load-test files found (config/loadtests/*.yaml next to the API).")
    _runs(client)


def _start_form(client: ApiClient, files: list[dict[str, Any]]) -> None:
    names = [f["name"] for f in files]
    choice = st.selectbox("Load-test file", names, key="loadtest_file")
    chosen = next(f for f in files if f["name"] == choice)
    if chosen.get("error"):
        st.error(f"This file cannot be read: {chosen['error']}")
        return
    st.caption(
        f"`{chosen['file']}` · target **{chosen['target']}**. Edit the rate shape (`load`: "
        "constant, ramp, step, sine or spike), `warmup_s`, `duration_s` and the SLOs; the "
        "target, payload and client stay the file's."
    )
    with st.form(f"loadtest-form-{choice}"):
        text = st.text_area(
            "Edits (YAML, merged over the file)",
            value=edits_text(chosen["editable"]),
            height=220,
            key=f"loadtest-edits-{choice}",
        )
        submitted = st.form_submit_button(
            "Start load test",
            type="primary",
            icon=":material/speed:",
            disabled=not client.can_control,
            help=None if client.can_control else "Needs the control token.",
        )
    if not submitted:
        return
    try:
        edits = parse_edits(text)
    except ValueError as exc:
        st.error(str(exc))
        return
    with api_errors("Starting the load test"), st.spinner("Checking the edits…"):
        run = client.start_loadtest(choice, edits)
        st.session_state[SHOWN] = run["run_id"]
        st.success(f"Started **{run['run_id']}**.")


@st.fragment(run_every=LIVE_S)
def _runs(client: ApiClient) -> None:
    """The running load test live, then every report: refreshed each second."""
    runs: list[dict[str, Any]] | None = None
    with api_errors("Listing load tests"):
        runs = client.loadtest_runs()
    if runs is None:
        return
    if not runs:
        st.info(f"**{NO_RUNS}.** Start one above, or run `streamsim loadtest FILE`.")
        return
    for run in runs:
        if run["status"] in ACTIVE:
            _live(client, run)
    st.subheader("Reports")
    st.table(runs_frame(runs).set_index("run"))  # plain HTML: every run id readable
    ids = [r["run_id"] for r in runs]
    if st.session_state.get(SHOWN) not in ids:
        st.session_state.pop(SHOWN, None)  # gone: the newest instead
    shown = st.selectbox("Show report", ids, key=SHOWN)
    with api_errors("Reading the report"):
        _report(client.loadtest_run(shown))


def _live(client: ApiClient, run: dict[str, Any]) -> None:
    st.subheader(f"Running: {run['run_id']}")
    progress = run.get("progress")
    if not progress:
        st.caption("Planning the requests; the first figures come within seconds…")
    else:
        latency = progress.get("latency_ms") or {}
        cols = st.columns(6)
        cols[0].metric("Achieved rate", fmt_rate(progress.get("achieved_rate")))
        cols[1].metric("p50", ms(latency.get("p50")))
        cols[2].metric("p95", ms(latency.get("p95")))
        cols[3].metric("p99", ms(latency.get("p99")))
        cols[4].metric("Errors", fmt_num(progress.get("errors")))
        cols[5].metric("Phase", str(progress.get("phase", "—")))
        total = max(1, int(progress.get("total") or 1))
        sent = int(progress.get("sent") or 0)
        st.progress(min(1.0, sent / total), text=f"sent {sent:,} of {total:,}")
    if client.can_control and st.button(
        "Stop load test", key=f"stop-{run['run_id']}", icon=":material/stop:"
    ):
        with api_errors("Stopping the load test"):
            client.stop_loadtest(run["run_id"])


def _report(run: dict[str, Any]) -> None:
    icon = STATUS_ICONS.get(run["status"], "")
    st.markdown(f"{icon} **{run['run_id']}** — {run['status']}")
    if run.get("error"):
        st.error(f"The load test failed:\n\n```\n{run['error']}\n```")
    report = run.get("report")
    if not report:
        if run["status"] not in ACTIVE:
            st.caption("No report: the load test ended before writing one.")
        return
    latency = report.get("latency_ms") or {}
    cols = st.columns(5)
    cols[0].metric("Achieved rate", fmt_rate(report.get("achieved_rate")))
    cols[1].metric("Intended rate", fmt_rate(report.get("intended_rate")))
    cols[2].metric("p50", ms(latency.get("p50")))
    cols[3].metric("p99", ms(latency.get("p99")))
    cols[4].metric("SLOs", "met" if report.get("ok") else "FAILED")
    st.dataframe(slo_frame(report), hide_index=True)
    for chart in run.get("charts") or []:
        st.caption(chart["name"].replace("_", " "))
        st.vega_lite_chart(spec=chart["spec"], key=f"chart-{run['run_id']}-{chart['name']}")
