"""The Load tests page in headless Chromium over a real `streamsim api` (the load test's target:
its own fraud endpoint, real uvicorn) on the session's broker: a short, low-rate load test is
edited and started from the page, its live figures show while it runs, and its report is then
listed with its Vega-Lite charts, next to an earlier report, which stays listed."""

from __future__ import annotations

import re
import time

import orjson
import pytest

from tests.integration.ui_stack import (
    TOKEN,
    WAIT_S,
    By,
    Keys,
    Stack,
    WebDriver,
    WebDriverWait,
    body_text,
    open_page,
    press,
    shoot,
    wait_text,
)

pytest_plugins = ("tests.integration.ui_stack",)
pytestmark = pytest.mark.integration

AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: 20 requests/s for 1 + 8 s, SLOs loose enough to hold on a busy CI machine.
EDITS = (
    "{load: {type: constant, rate: 20}, warmup_s: 1, duration_s: 8, "
    "slo: {p99_ms: 2000, error_rate: 0.5, achieved_rate_fraction: 0.5}}"
)
EARLIER = "endpoint_2000-20260101T000000Z"
LIVE_RATE = re.compile(r"Achieved rate\s+(\d[\d,.]*)/s")


def test_a_short_load_test_from_the_page_live_then_its_report(
    fresh_servers: Stack, browser: WebDriver
) -> None:
    """On servers of its own: the page must list exactly this test's report and the earlier
    one."""
    servers = fresh_servers
    earlier = servers.data / "loadtests" / EARLIER  # as `streamsim loadtest` leaves one
    earlier.mkdir(parents=True)
    report = {"name": "endpoint_2000", "ok": True, "started_at": "2026-01-01T00:00:00+00:00"}
    (earlier / "report.json").write_bytes(orjson.dumps(report))
    open_page(browser, f"{servers.ui_url}/load-tests", "Load tests")
    wait_text(browser, "Load-test file", "Start load test", EARLIER)
    edits = browser.find_element(By.CSS_SELECTOR, "textarea")
    edits.send_keys(Keys.CONTROL, "a")
    edits.send_keys(Keys.DELETE)
    edits.send_keys(EDITS)
    press(browser, "Start load test")  # once: a second click would submit the form again
    text = wait_text(browser, "Started")
    run_id = re.search(r"Started (\S+)\.", text)
    assert run_id, text
    run = run_id[1]

    # Live: the running test's own figures on the page, an achieved rate above 0.
    def live(d: WebDriver) -> bool:
        text = body_text(d)
        rate = LIVE_RATE.search(text)
        running = all(n in text for n in (f"Running: {run}", "measured", "p95", "p99"))
        return bool(running and rate and float(rate[1].replace(",", "")) > 0)

    WebDriverWait(browser, WAIT_S, poll_frequency=0.25).until(live)
    shoot(browser, "screenshots/load-tests-live.png")

    # The report: listed, shown with its charts, the earlier one still listed.
    deadline = time.monotonic() + WAIT_S
    while (found := servers.http.get(f"/v1/loadtests/runs/{run}").json())["status"] == "running":
        assert time.monotonic() < deadline, found
        time.sleep(0.5)
    assert found["status"] == "finished", found
    report = found["report"]
    assert report["requests"] > 50 and report["achieved_rate"] > 10, report
    assert {c["name"] for c in found["charts"]} == {"latency_over_time", "latency_percentiles"}
    wait_text(browser, "latency over time", "latency percentiles", "SLOs", EARLIER)
    # The live panel goes at the page's next refresh (each second): one render can list the
    # run as running and then fetch its finished report (CI saw both on one page, once).
    WebDriverWait(browser, WAIT_S, poll_frequency=0.25).until(
        lambda d: f"Running: {run}" not in body_text(d)
    )
    charts = browser.find_elements(By.CSS_SELECTOR, "[data-testid='stVegaLiteChart']")
    assert len(charts) == 2, body_text(browser)
    listed = [r["run_id"] for r in servers.http.get("/v1/loadtests/runs").json()["runs"]]
    assert listed == [run, EARLIER]
    shoot(browser, "screenshots/load-tests.png")
    for crash in ("Traceback (most recent call last)", 'File "/'):
        assert crash not in body_text(browser)
