"""Runs page: pick a scenario, set rate, fraud/fault mix, skew and lateness, start and stop runs,
and change a running run's speed and rate cap live. Each run shows its components (simulator,
Spark job, fraud endpoint) with their states, the job's batch progress per query, and (with the
control token) each component's log tail.

`?scenario=NAME` in the URL preselects a scenario.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from ui.client import ApiClient, ApiError, ApiUnavailable
from ui.knobs import GROUP_TITLES, NO_CAP, Knob, knobs_for, run_request
from ui.view import REFRESH_S, STATUS_ICONS, api_errors, compact, fmt_ms, fmt_num

PREFERRED = ("cards", "sensors")
LIVE_SPEEDS: list[Any] = [0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, "max"]
LIVE_CAPS: list[Any] = [NO_CAP, 10.0, 50.0, 100.0, 500.0, 1000.0, 5000.0, 10_000.0, 50_000.0]
COMPONENT_ICONS = {
    "starting": ":orange[◌]",
    "running": ":green[●]",
    "exited": ":blue[■]",
    "stopped": ":gray[■]",
}
COMPONENT_TITLES = {"simulator": "Simulator", "job": "Spark job", "endpoint": "Fraud endpoint"}


def render(client: ApiClient) -> None:
    st.header("Scenario runs")
    scenarios: list[dict[str, Any]] | None = None
    with api_errors("Listing scenarios"):
        scenarios = client.scenarios()
    if scenarios:
        _start_form(client, scenarios)
    elif scenarios is not None:
        st.info("No scenario files found (config/scenarios/*.yaml next to the API).")
    st.subheader("Runs")
    _runs_list(client)


def _default_index(names: list[str]) -> int:
    wanted = st.query_params.get("scenario")
    for choice in (wanted, *PREFERRED):
        if choice in names:
            return names.index(choice)
    return 0


def _start_form(client: ApiClient, scenarios: list[dict[str, Any]]) -> None:
    names = [s["name"] for s in scenarios]
    name = st.selectbox("Scenario", names, index=_default_index(names), key="run-scenario")
    start_form(client, next(s for s in scenarios if s["name"] == name))


def start_form(client: ApiClient, scenario: dict[str, Any]) -> None:
    """The sliders of one scenario (a `GET /v1/scenarios` item) and its "Start run" button;
    other pages embed it too (the Vehicles page, for vehicles)."""
    name = scenario["name"]
    if scenario["error"]:
        st.error(f"This scenario file does not validate: {scenario['error']}")
        return
    config: dict[str, Any] = scenario["config"]
    knobs = knobs_for(config, scenario.get("tunable") or [])
    st.caption(
        f"`{scenario['file']}` — {config.get('domain', {}).get('type', '?')} domain, "
        f"{len(config.get('classes') or [])} entity classes. Sliders start at the file's values; "
        "only the ones you move are sent as overrides (clock and delivery apply to every class). "
        "Only the keys the API allows for this scenario have sliders."
    )
    values: dict[str, Any] = {}
    with st.form(f"run-form-{name}", border=True):
        groups = [g for g in GROUP_TITLES if any(k.group == g for k in knobs)]
        columns = st.columns(len(groups))
        for column, group in zip(columns, groups, strict=True):
            with column:
                st.markdown(f"**{GROUP_TITLES[group]}**")
                for knob in (k for k in knobs if k.group == group):
                    values[knob.key] = _widget(name, knob)
        submitted = st.form_submit_button(
            "Start run",
            type="primary",
            disabled=not client.can_control,
            icon=":material/play_arrow:",
        )
    if not client.can_control:
        st.info(
            "Starting and stopping runs needs the API's control token: set "
            "STREAMSIM_API_TOKEN for the UI (`streamsim ui` passes it on)."
        )
    if submitted:
        request = run_request(config, knobs, values)
        try:
            run = client.start_run(
                name,
                speed=request.speed,
                duration_s=request.duration_s,
                overrides=request.overrides,
            )
        except ApiUnavailable as exc:
            st.error(f"**API down** — {exc}")
        except ApiError as exc:
            st.error(f"**Could not start {name}** (HTTP {exc.status}): {exc}")
        else:
            names = [
                COMPONENT_TITLES.get(c["name"], c["name"]) for c in run.get("components") or []
            ]
            started = f" Starting: {', '.join(names)}." if names else ""
            st.success(f"Started run `{run['run_id']}` (pid {run['pid']}).{started}")
        with st.expander("Request sent"):
            st.json(
                {
                    "scenario": name,
                    "speed": request.speed,
                    "duration_s": request.duration_s,
                    "overrides": request.overrides,
                }
            )


def _widget(scenario: str, knob: Knob) -> Any:
    key = f"knob:{scenario}:{knob.key}"
    if knob.kind == "select":
        return st.select_slider(
            knob.label,
            options=list(knob.options),
            value=knob.default,
            key=key,
            help=knob.help or None,
            format_func=_option_label,
        )
    high = max(knob.high, float(knob.default))
    return st.slider(
        knob.label,
        min_value=float(knob.low),
        max_value=float(high),
        value=float(knob.default),
        step=knob.step,
        key=key,
        help=knob.help or None,
        format="%g",
    )


def _option_label(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1:
        return f"{int(value):,}"
    return str(value)


@st.fragment(run_every=REFRESH_S)
def _runs_list(client: ApiClient) -> None:
    try:
        runs = client.runs()
    except (ApiUnavailable, ApiError) as exc:
        st.error(f"**API down** — {exc}" if isinstance(exc, ApiUnavailable) else str(exc))
        return
    if not runs:
        st.caption("No runs yet: start one above.")
        return
    for run in runs:
        with st.container(border=True):
            left, right = st.columns([5, 1])
            with left:
                icon = STATUS_ICONS.get(run["status"], "")
                speed = run["speed"] if run["speed"] is not None else "file"
                st.markdown(
                    f"{icon} **{run['scenario']}** `{run['run_id']}` — **{run['status']}**  \n"
                    f"started {fmt_ms(run['started_at'])} UTC · speed {speed} · "
                    f"duration {run['duration_s'] or 'file'} s · pid {run['pid']}"
                    + (f" · ended {fmt_ms(run['ended_at'])}" if run["ended_at"] else "")
                )
                summary = run.get("summary")
                if summary:
                    st.markdown(
                        f"{fmt_num(summary.get('events'))} events, "
                        f"{fmt_num(summary.get('duplicates'))} duplicates, "
                        f"{fmt_num(summary.get('dropped'))} dropped, "
                        f"{fmt_num(summary.get('outages'))} outages, "
                        f"{fmt_num(summary.get('events_per_s'))} events/s"
                    )
                if run.get("overrides"):
                    st.caption(f"overrides: `{compact(run['overrides'])}`")
                if run.get("live"):
                    st.caption(f"pacing set while running: `{compact(run['live'])}`")
                if run.get("error"):
                    st.code(run["error"], language=None)
                components_view(run)
                if run["status"] == "running" and client.can_control:
                    live_form(client, run)
            with right:
                active = run["status"] in ("running", "stopping") and client.can_control
                if active and st.button(
                    "Stop", key=f"stop-{run['run_id']}", icon=":material/stop:"
                ):
                    stop_run(client, run["run_id"])


def component_line(run: dict[str, Any], component: dict[str, Any]) -> str:
    """`● Spark job cards: running · pid 42` (exit code once it ended)."""
    name = component.get("name", "?")
    title = COMPONENT_TITLES.get(name, name)
    if name == "job" and run.get("job"):
        title += f" `{run['job']}`"
    state = component.get("state", "?")
    text = f"{COMPONENT_ICONS.get(state, '')} {title}: **{state}**"
    if component.get("exit_code") is not None:
        text += f" (code {component['exit_code']})"
    if component.get("pid") is not None:
        text += f" · pid {component['pid']}"
    return text


def progress_rows(component: dict[str, Any]) -> list[dict[str, Any]]:
    """The job's latest batch per query, as table rows."""
    return [
        {
            "query": q.get("query"),
            "batch": q.get("batch_id"),
            "rows": q.get("input_rows"),
            "rows/s": q.get("processed_rows_per_s"),
            "watermark": q.get("watermark"),
            "watermark behind newest s": q.get("watermark_behind_newest_s"),
            "behind topic end": q.get("offsets_behind"),
            "late dropped": q.get("late_events"),
            "report age s": q.get("report_age_s"),
        }
        for q in component.get("progress") or []
    ]


def components_view(run: dict[str, Any]) -> None:
    """Each component's state; the job's batch progress; log tails (control token only)."""
    components = run.get("components") or []
    if not components:
        return
    st.markdown("  \n".join(component_line(run, c) for c in components))
    for component in components:
        rows = progress_rows(component)
        if component.get("name") == "job" and rows:
            st.dataframe(rows, hide_index=True, width="stretch")
        elif component.get("name") == "job" and component.get("state") in ("starting", "running"):
            st.caption("No batch from the job yet (Spark takes a while to start).")
    tails = [c for c in components if c.get("log_tail")]
    if tails:
        with st.expander("Component logs"):
            for component in tails:
                st.markdown(f"**{COMPONENT_TITLES.get(component['name'], component['name'])}**")
                st.code(component["log_tail"], language=None)


def live_form(client: ApiClient, run: dict[str, Any]) -> None:
    """Speed and rate cap of a running run, sent live (PATCH); only what was moved is sent."""
    live = run.get("live") or {}
    pacing = (run.get("overrides") or {}).get("pacing") or {}
    speed = live.get("speed", run["speed"] or pacing.get("speed"))
    speeds = LIVE_SPEEDS if speed in LIVE_SPEEDS or speed is None else [*LIVE_SPEEDS, speed]
    cap = live.get("max_rate", pacing.get("max_rate")) or NO_CAP
    caps = LIVE_CAPS if cap in LIVE_CAPS else [*LIVE_CAPS, cap]
    shown_speed = 1.0 if speed is None else speed
    with st.form(f"live-{run['run_id']}", border=False):
        left, middle, right = st.columns([3, 3, 1], vertical_alignment="bottom")
        new_speed = left.select_slider(
            "Speed (live)",
            options=sorted(speeds, key=_order),
            value=shown_speed,
            key=f"live-speed-{run['run_id']}",
            format_func=_option_label,
        )
        new_cap = middle.select_slider(
            "Cap on events/s (live)",
            options=sorted(caps, key=_order),
            value=cap,
            key=f"live-cap-{run['run_id']}",
            format_func=_option_label,
        )
        applied = right.form_submit_button("Apply", icon=":material/speed:")
    if applied:
        changes: dict[str, Any] = {}
        if new_speed != shown_speed:
            changes["speed"] = new_speed
        if new_cap != cap:
            changes["max_rate"] = None if new_cap == NO_CAP else float(new_cap)
        if not changes:
            st.info("Nothing moved: the run keeps its pacing.")
            return
        try:
            client.retune_run(run["run_id"], changes)
        except ApiUnavailable as exc:
            st.error(f"**API down** — {exc}")
        except ApiError as exc:
            st.error(f"**Could not retune {run['run_id']}** (HTTP {exc.status}): {exc}")
        else:
            st.toast(f"{run['run_id']}: speed {new_speed}, cap {new_cap}")


def _order(option: Any) -> float:
    """Numbers in order; 'max' last, 'no cap' first."""
    if option == "max":
        return float("inf")
    return -1.0 if option == NO_CAP else float(option)


def stop_run(client: ApiClient, run_id: str) -> None:
    """Stop a run from a button inside a fragment (reruns that fragment)."""
    try:
        stopped = client.stop_run(run_id)
    except ApiUnavailable as exc:
        st.error(f"**API down** — {exc}")
    except ApiError as exc:
        st.error(f"**Could not stop {run_id}** (HTTP {exc.status}): {exc}")
    else:
        st.toast(f"{run_id}: {stopped['status']}")
        st.rerun(scope="fragment")
