"""Evaluation page:
- evaluate now: pick a run (`?run=ID` preselects one; default the newest), press "Evaluate"
  and its scores show as charts once `streamsim evaluate` has scored it (a running run: once
  it finished);
- the run-to-run comparison: one table per scenario, a row per evaluated run with its knobs
  (speed, duration, seed, every override) and its precision, recall and F1 per path and type;
- the newest `streamsim evaluate` report from the shell, or a clear note that there is none.

Every report shows the same way: precision, recall, F1 and detection latency per label type
and path, as charts and a table."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from ui.client import ApiClient, ApiError, ApiUnavailable
from ui.view import REFRESH_S, api_errors, compact, fmt_ms, fmt_num

NO_EVALUATION = "No evaluation yet"
NOT_EVALUATED = "Not evaluated yet"
PENDING = ("waiting", "running")
#: Runs whose evaluation can be asked for (a stopping run may still finish by itself).
SCORABLE = ("running", "stopping", "finished")
#: The figures of each path and type in the comparison, by their column suffix.
COMPARED = {"precision": "P", "recall": "R", "f1": "F1"}


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


def flat_knobs(knobs: dict[str, Any]) -> dict[str, Any]:
    """A run's knobs as dotted keys: `speed`, `duration_s`, `seed`, each override leaf
    (`domain.fraud.card_testing.rate_per_1k_card_hours`) and live pacing (`live.speed`). An
    entity class's copy of a top-level override (`classes.truck.delivery.drops.probability`,
    as the panel's fleet sliders send) is left out when it equals the top-level value."""
    out: dict[str, Any] = {k: knobs.get(k) for k in ("speed", "duration_s", "seed")}
    leaves = _leaves(knobs.get("overrides") or {}, ())
    for key, value in leaves.items():
        parts = key.split(".")
        if parts[0] == "classes" and len(parts) > 2 and leaves.get(".".join(parts[2:])) == value:
            continue
        out[key] = value
    out.update({f"live.{k}": v for k, v in (knobs.get("live") or {}).items()})
    return out


def _leaves(node: Any, at: tuple[str, ...]) -> dict[str, Any]:
    if isinstance(node, dict) and node:
        found: dict[str, Any] = {}
        for key, value in node.items():
            found.update(_leaves(value, (*at, str(key))))
        return found
    return {".".join(at): node}


def comparison_frames(evaluations: list[dict[str, Any]]) -> dict[str, pd.DataFrame]:
    """Scenario -> one row per done evaluation (newest first, as given), all cells text: the
    run (the index), when it was scored, its knobs (a knob set by some run of the scenario is
    a column; "file" where a run kept the file's value) and precision (P), recall (R) and F1
    per path and type (`pipeline · card_testing · R`)."""
    rows: dict[str, list[tuple[dict[str, str], dict[str, Any], dict[str, str]]]] = {}
    for found in evaluations:
        report = found.get("report")
        if found.get("status") != "done" or not isinstance(report, dict):
            continue
        scores = {
            f"{path} · {label} · {suffix}": fmt_num(score.get(figure), 3)
            for path, labels in (report.get("paths") or {}).items()
            for label, score in (labels or {}).items()
            for figure, suffix in COMPARED.items()
        }
        knobs = flat_knobs(found.get("knobs") or {})
        scored = {"run": str(found["run_id"]), "scored": fmt_ms(found.get("ended_at"))}
        rows.setdefault(str(found.get("scenario")), []).append((scored, knobs, scores))
    frames = {}
    for scenario, found_rows in rows.items():
        keys: list[str] = []
        for _, knobs, _ in found_rows:
            keys.extend(k for k, v in knobs.items() if v is not None and k not in keys)
        records = [
            {**scored, **{k: _knob_text(knobs.get(k)) for k in keys}, **scores}
            for scored, knobs, scores in found_rows
        ]
        frames[scenario] = pd.DataFrame(records).fillna("—").set_index("run")
    return frames


def _knob_text(value: Any) -> str:
    if value is None:
        return "file"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def render(client: ApiClient) -> None:
    st.header("Evaluation")
    scenario = _evaluate_a_run(client)
    _comparison(client, scenario)
    st.subheader("Latest `streamsim evaluate` report")
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


def _evaluate_a_run(client: ApiClient) -> str | None:
    """The run picker, its "Evaluate" button and its evaluation; the picked run's scenario."""
    st.subheader("Evaluate a run")
    runs: list[dict[str, Any]] | None = None
    with api_errors("Listing runs"):
        runs = client.runs()
    if runs is None:
        return None
    if not runs:
        st.info(
            "No runs yet: start one on the Runs page, then evaluate it here (while it runs, "
            "it is scored once it has finished).",
            icon=":material/play_circle:",
        )
        return None
    by_id = {r["run_id"]: r for r in runs}
    ids = list(by_id)
    wanted = st.query_params.get("run")
    run_id = st.selectbox(
        "Run",
        ids,
        index=ids.index(wanted) if wanted in ids else 0,
        key="evaluate-run",
        format_func=lambda i: f"{by_id[i]['scenario']} · {i} · {by_id[i]['status']}",
    )
    run = by_id[run_id]
    st.caption(
        f"`{run_id}`: **{run['status']}**, started {fmt_ms(run.get('started_at'))} UTC"
        + (f" · overrides `{compact(run['overrides'])}`" if run.get("overrides") else "")
    )
    scorable = run["status"] in SCORABLE
    pressed = st.button(
        "Evaluate",
        type="primary",
        icon=":material/insights:",
        key="evaluate-button",
        disabled=not (client.can_control and scorable),
        help="Scores the run's alerts and decisions against its truth (`streamsim evaluate`).",
    )
    if not client.can_control:
        st.info("Evaluating a run needs the API's control token (STREAMSIM_API_TOKEN).")
    elif not scorable:
        st.caption(
            f"This run was {run['status']}: only a run whose simulator finished has the run "
            "record an evaluation scores."
        )
    if pressed:
        try:
            client.evaluate_run(run_id)
        except ApiUnavailable as exc:
            st.error(f"**API down** — {exc}", icon=":material/cloud_off:")
        except ApiError as exc:
            st.error(f"**Could not evaluate {run_id}** (HTTP {exc.status}): {exc}")
    _run_evaluation(client, run_id)
    return str(run["scenario"])


def _run_evaluation(client: ApiClient, run_id: str) -> None:
    found: dict[str, Any] | None = None
    with api_errors("Reading the run's evaluation"):
        found = client.run_evaluation(run_id)
        if found is None:
            st.caption(f"{NOT_EVALUATED}.")
    if found is None:
        return
    if found["status"] in PENDING:
        _pending(client, run_id)
    elif found["status"] == "failed":
        st.error(f"**The evaluation of {run_id} failed.**", icon=":material/error:")
        if found.get("error"):
            st.code(found["error"], language=None)
    else:
        report = found.get("report") or {}
        st.markdown(f"### {report.get('scenario', found['scenario'])} — run `{run_id}`")
        st.caption(f"Scored {fmt_ms(found.get('ended_at'))} UTC" + _run_caption(report))
        report_view(report)


@st.fragment(run_every=REFRESH_S)
def _pending(client: ApiClient, run_id: str) -> None:
    """The evaluation under way, polled; once it has ended, the whole page again (its report
    renders there, not in this refreshing fragment)."""
    try:
        found = client.run_evaluation(run_id)
    except (ApiUnavailable, ApiError) as exc:
        st.error(f"**API down** — {exc}" if isinstance(exc, ApiUnavailable) else str(exc))
        return
    if found is None or found["status"] not in PENDING:
        st.rerun()
    what = (
        "waiting for the run to finish"
        if found["status"] == "waiting"
        else "`streamsim evaluate` is scoring it"
    )
    st.info(f"Evaluating `{run_id}`: {what}.", icon=":material/hourglass_top:")


def _comparison(client: ApiClient, first: str | None) -> None:
    st.subheader("Run-to-run comparison")
    frames: dict[str, pd.DataFrame] | None = None
    with api_errors("Listing run evaluations"):
        frames = comparison_frames(client.run_evaluations())
    if frames is None:
        return
    if not frames:
        st.caption("No evaluated runs yet: evaluate a run above to compare it with the next.")
        return
    for scenario in sorted(frames, key=lambda name: name != first):
        st.markdown(f"**{scenario}**")
        st.table(frames[scenario])


def _run_caption(report: dict[str, Any]) -> str:
    run = report.get("run") or {}
    if not run:
        return ""
    return f" · run `{run.get('id_prefix')}`, {fmt_num(run.get('events'))} events"


def _report(found: dict[str, Any]) -> None:
    report = found["report"]
    st.markdown(f"### {report.get('scenario', '?')}")
    st.caption(
        f"`{found['file']}` — written {fmt_ms(found['modified_at'])} UTC" + _run_caption(report)
    )
    report_view(report)


def report_view(report: dict[str, Any]) -> None:
    """An evaluation report: headline figures, quality and latency charts per path, a table."""
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
