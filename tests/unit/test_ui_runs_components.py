"""The Runs page shows each run's components, their states, the job's batch progress and,
when the API sent them (control token), the components' log tails."""

from __future__ import annotations

from typing import Any

import httpx
from streamlit.testing.v1 import AppTest

from tests.unit.test_ui_pages import NOW, page_script, sensors, texts
from ui.client import ApiClient
from ui.sections.runs import component_line, progress_rows


def component(name: str, state: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "state": state, "pid": None, "exit_code": None, "started_at": NOW,
            "ended_at": None, "progress": None, "url": None, "log": None, "log_tail": None,
            **extra}  # fmt: skip


QUERY = {"query": "sensors", "batch_id": 3, "input_rows": 1200, "at": NOW,
         "processed_rows_per_s": 800.0, "watermark": "2026-01-01T00:01:00.000Z",
         "watermark_delay_s": 28_000_000.0, "watermark_behind_newest_s": 31.5,
         "offsets_behind": 640, "late_events": 2, "report_age_s": 0.4}  # fmt: skip
RUN = {
    "run_id": "sensors-1", "scenario": "sensors", "status": "running", "pid": 41,
    "started_at": NOW, "ended_at": None, "exit_code": None, "speed": None, "duration_s": None,
    "seed": None, "live": None, "job": "sensors", "overrides": None, "summary": None,
    "error": None, "workdir": None,
    "components": [
        component("job", "running", pid=40, progress=[QUERY], log_tail="started 1 queries"),
        component("simulator", "exited", pid=41, exit_code=0),
    ],
}  # fmt: skip


def runs_page(runs: list[dict[str, Any]]) -> AppTest:
    routes = {"/v1/scenarios": {"scenarios": []}, "/v1/runs": {"runs": runs}}

    def handle(request: httpx.Request) -> httpx.Response:
        body = routes.get(request.url.path)
        return httpx.Response(200 if body else 404, json=body or {"detail": "not here"})

    client = ApiClient("http://api", token="t0k", transport=httpx.MockTransport(handle))
    test = AppTest.from_function(page_script, args=("runs", client), default_timeout=30)
    test.run()
    assert not test.exception, test.exception
    return test


def test_the_runs_page_shows_components_progress_and_logs() -> None:
    test = runs_page([RUN])
    shown = texts(test)
    assert "Spark job `sensors`: **running** · pid 40" in shown
    assert "Simulator: **exited** (code 0) · pid 41" in shown
    (table,) = test.dataframe
    assert list(table.value["query"]) == ["sensors"]
    assert list(table.value["late dropped"]) == [2]
    # The lag on the stream's own clock, not wall clock against simulated event time.
    assert list(table.value["watermark behind newest s"]) == [31.5]
    assert list(table.value["behind topic end"]) == [640]
    assert "watermark delay s" not in table.value.columns
    assert "started 1 queries" in shown  # the log tail, sent to token holders only


def test_a_starting_job_says_it_has_no_batch_yet() -> None:
    run = {**RUN, "components": [component("job", "starting", pid=40)]}
    test = runs_page([run])
    assert "No batch from the job yet" in texts(test)
    assert not test.dataframe


def test_component_helpers() -> None:
    line = component_line({"job": None}, component("endpoint", "stopped", pid=7, exit_code=-15))
    assert line == ":gray[■] Fraud endpoint: **stopped** (code -15) · pid 7"
    assert progress_rows(component("simulator", "running")) == []
    (row,) = progress_rows(component("job", "running", progress=[QUERY]))
    assert row["batch"] == 3 and row["rows/s"] == 800.0


def test_starting_a_run_names_its_components() -> None:
    scenario: dict[str, Any] = {"name": "sensors", "file": "s.yaml", "config": sensors(),
                "error": None, "tunable": []}  # fmt: skip
    started = {**RUN, "pid": None}
    routes: dict[tuple[str, str], Any] = {
        ("GET", "/v1/scenarios"): {"scenarios": [scenario]},
        ("GET", "/v1/runs"): {"runs": []},
        ("POST", "/v1/control/runs"): started,
    }

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=routes[(request.method, request.url.path)])

    client = ApiClient("http://api", token="t0k", transport=httpx.MockTransport(handle))
    test = AppTest.from_function(page_script, args=("runs", client), default_timeout=30)
    test.run()
    test.button[0].click().run()
    assert not test.exception, test.exception
    assert "Starting: Spark job, Simulator." in texts(test)
