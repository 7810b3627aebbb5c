"""The Load tests page against a canned API (Streamlit's AppTest), and its pure helpers."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.conftest import free_port
from tests.unit.test_ui_pages import app, texts
from ui.client import ApiClient
from ui.sections.loadtests import parse_edits, runs_frame, slo_frame

SPEC = {"mark": "line", "data": {"values": [{"x": 1, "y": 2}]},
        "encoding": {"x": {"field": "x", "type": "quantitative"}}}  # fmt: skip
LIVE = {"run_id": "fraud_endpoint-live", "file": "fraud_endpoint", "status": "running",
        "started_at": 1_795_000_000_000, "summary": None, "charts": [], "report": None,
        "progress": {"phase": "measured", "achieved_rate": 123.0, "sent": 50, "total": 100,
                     "errors": 0,
                     "latency_ms": {"p50": 1.25, "p95": 2.5, "p99": 4.75}}}  # fmt: skip
REPORT = {"requests": 100, "errors": 0, "achieved_rate": 99.0, "intended_rate": 100.0,
          "latency_ms": {"p50": 1.0, "p99": 3.0}, "ok": True,
          "slo": {"p99_ms": {"threshold": 10, "measured": 3.0, "ok": True}}}  # fmt: skip
DONE = {**LIVE, "run_id": "fraud_endpoint-done", "status": "finished", "progress": None,
        "summary": REPORT}  # fmt: skip


def canned(requests: list[httpx.Request], runs: list[dict[str, Any]]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        path = request.url.path
        if path == "/v1/loadtests/files":
            editable = {"load": {"type": "constant", "rate": 1000}, "slo": {"p99_ms": 10}}
            return httpx.Response(200, json={"files": [
                {"name": "fraud_endpoint", "file": "f.yaml", "target": "http",
                 "editable": editable, "error": None}], "tunable": ["load", "slo"]})  # fmt: skip
        if path == "/v1/loadtests/runs":
            return httpx.Response(200, json={"runs": runs})
        if path.startswith("/v1/loadtests/runs/"):
            run = next(r for r in runs if r["run_id"] == path.rsplit("/", 1)[1])
            detail = {**run, "report": run["summary"],
                      "charts": [{"name": "latency_percentiles", "spec": SPEC}]}  # fmt: skip
            return httpx.Response(200, json=detail)
        if path == "/v1/control/loadtests":
            return httpx.Response(201, json={**LIVE, "run_id": "fraud_endpoint-new"})
        return httpx.Response(404, json={"detail": "not here"})

    return httpx.MockTransport(handle)


def test_parse_edits() -> None:
    assert parse_edits("") == {}
    assert parse_edits("load: {type: constant, rate: 5}\n") == {
        "load": {"type": "constant", "rate": 5}
    }
    with pytest.raises(ValueError, match="mapping"):
        parse_edits("- 1\n")
    with pytest.raises(ValueError, match="YAML"):
        parse_edits("load: {rate: [\n")


def test_frames() -> None:
    frame = runs_frame([LIVE, DONE])
    assert list(frame["status"]) == ["running", "finished"]
    assert list(frame["SLOs"]) == [None, "met"]
    assert list(frame["p99"]) == ["—", "3.00 ms"] and list(frame["achieved"]) == ["—", "99.0/s"]
    assert slo_frame(REPORT).to_dict("records") == [
        {"SLO": "p99_ms", "threshold": 10, "measured": 3.0, "ok": "✓"}
    ]


def test_the_page_shows_live_figures_reports_and_starts_with_the_edits() -> None:
    requests: list[httpx.Request] = []
    client = ApiClient("http://api", token="t0k", transport=canned(requests, [LIVE, DONE]))
    test = app("loadtests", client)
    metrics = {m.label: m.value for m in test.metric}
    assert metrics["Achieved rate"] in ("123.0/s", "123/s")
    assert metrics["p99"] == "4.75 ms"
    assert test.selectbox(key="loadtest_report").value == "fraud_endpoint-live"
    test.selectbox(key="loadtest_report").set_value("fraud_endpoint-done").run()
    assert not test.exception
    assert "fraud_endpoint-done" in texts(test) and "latency percentiles" in texts(test)
    test.text_area(key="loadtest-edits-fraud_endpoint").set_value(
        "load: {type: constant, rate: 20}\nduration_s: 3\n"
    )
    test.button[0].click().run()
    assert not test.exception
    (post,) = [r for r in requests if r.method == "POST"]
    assert post.headers["authorization"] == "Bearer t0k"
    assert json.loads(post.content) == {
        "file": "fraud_endpoint",
        "edits": {"load": {"type": "constant", "rate": 20}, "duration_s": 3},
    }
    assert "Started **fraud_endpoint-new**." in texts(test)


def test_the_page_says_when_the_api_is_down() -> None:
    test = app("loadtests", ApiClient(f"http://127.0.0.1:{free_port()}", token="t", timeout_s=2))
    errors = [e.value for e in test.error]
    assert errors and all("not reachable" in e and "streamsim api" in e for e in errors), errors


def test_without_the_token_the_start_is_disabled() -> None:
    client = ApiClient("http://api", token="", transport=canned([], []))
    test = app("loadtests", client)
    assert test.button[0].disabled
    assert "No load test yet" in texts(test)
