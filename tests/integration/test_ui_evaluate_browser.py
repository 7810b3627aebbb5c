"""Issue 15's "done when": from the panel alone, a scenario runs end to end and its evaluation
shows. Headless Chromium against a real `streamsim api` and Streamlit on the session broker;
the run's components are real (simulator, Spark job, fraud endpoint in POS mode) and so is the
evaluation (`streamsim evaluate` on the run's own records, with the batch oracle's parity for
vehicles).

For each of cards and vehicles the test moves the Runs page's sliders to a
short run (few entities, a short simulated span, fault or fraud rates up so that every run has
incidents), presses "Start run", then on the Evaluation page presses "Evaluate": the card run
while it still runs (it is scored once finished), the vehicle run once it has finished. The
page must show the report's own figures, its charts, and the run in the comparison table.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.integration.ui_stack import (
    TOKEN,
    WAIT_S,
    ActionChains,
    By,
    Keys,
    Stack,
    WebDriver,
    WebDriverWait,
    open_page,
    press,
    shoot,
    wait_text,
)

pytest_plugins = ("tests.integration.ui_stack",)
pytestmark = pytest.mark.integration

AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: A run: endpoint or Spark up, the simulated span, the drain; then the evaluation.
RUN_S = 240
ENTITIES = "Entities (cards, devices)"
SPEED = "Speed (simulated s per wall s)"
DURATION = "Duration (simulated s)"
#: Per scenario: the sliders moved (label -> the option shown, or "max" for the slider's
#: top), whether Evaluate is pressed while the run still runs, and its scored path.
SCENARIOS: dict[str, dict[str, Any]] = {
    # 2,000 cards for 30 simulated minutes at 60x, in POS mode through the run's endpoint;
    # every fraud type at the slider's top rate: a few incidents each.
    "cards": {
        "sliders": {
            ENTITIES: "2000",
            DURATION: "1800",
            "Send transactions to": "http",
            **{
                f"fraud / {kind} / rate per 1k card hours": "max"
                for kind in (
                    "impossible travel",
                    "card testing",
                    "account takeover",
                    "compromised terminal",
                )
            },
        },
        "while_running": True,
        "path": "endpoint",
    },
    # 50 vehicles for 10 simulated minutes at 30x, the short faults at the slider's top rate
    # (the best-supported type, gps_jump, had 24 incidents at 150 vehicles and 1.5 an hour).
    "vehicles": {
        "sliders": {
            ENTITIES: "50",
            SPEED: "30",
            **{
                f"faults / rate per hour / {kind}": "max"
                for kind in ("gps jump", "harsh braking", "speeding")
            },
        },
        "while_running": False,
        "path": "pipeline",
    },
}


def slider(driver: WebDriver, label: str) -> Any:
    return driver.find_element(By.XPATH, f"//input[@type='range' and @aria-label='{label}']")


def slide(driver: WebDriver, label: str, target: str) -> None:
    """Move a form slider with its keys: to its top (`max`, End), or from its bottom (Home)
    right until it shows `target`. The form holds the value until "Start run"."""
    thumb = slider(driver, label)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", thumb)
    driver.execute_script("arguments[0].focus();", thumb)  # a visually hidden range input
    if target == "max":
        ActionChains(driver).send_keys(Keys.END).perform()
        WebDriverWait(driver, WAIT_S).until(
            lambda d: (
                slider(d, label).get_attribute("aria-valuenow")
                == slider(d, label).get_attribute("aria-valuemax")
            )
        )
        return
    ActionChains(driver).send_keys(Keys.HOME).perform()
    for _ in range(30):
        if slider(driver, label).get_attribute("aria-valuetext") == target:
            return
        ActionChains(driver).send_keys(Keys.ARROW_RIGHT).perform()
        time.sleep(0.1)
    shown = slider(driver, label).get_attribute("aria-valuetext")
    raise AssertionError(f"slider {label!r} shows {shown!r}, not {target!r}")


def start_run(browser: WebDriver, servers: Stack, scenario: str) -> str:
    """Set the scenario's sliders on the Runs page, press "Start run"; the new run's id."""
    open_page(browser, f"{servers.ui_url}/runs?scenario={scenario}", "Scenario runs")
    wait_text(browser, "Start run", ENTITIES)
    for label, target in SCENARIOS[scenario]["sliders"].items():
        slide(browser, label, target)
    before = {r["run_id"] for r in servers.http.get("/v1/runs").json()["runs"]}
    press(browser, "Start run")
    wait_text(browser, "Started run", timeout_s=RUN_S)  # its topics first made on a new broker
    (run_id,) = {r["run_id"] for r in servers.http.get("/v1/runs").json()["runs"]} - before
    return str(run_id)


def wait_run(http: httpx.Client, run_id: str, statuses: tuple[str, ...]) -> dict[str, Any]:
    deadline = time.monotonic() + RUN_S
    while True:
        run: dict[str, Any] = http.get(f"/v1/runs/{run_id}", headers=AUTH).json()
        if run["status"] in statuses:
            return run
        assert run["status"] in ("running", "stopping"), run["error"]
        assert time.monotonic() < deadline, f"run not {statuses} after {RUN_S}s: {run}"
        time.sleep(1.0)


def wait_scored(http: httpx.Client, run_id: str) -> dict[str, Any]:
    """The run's evaluation once done or failed (its error says why)."""
    deadline = time.monotonic() + RUN_S
    while True:
        found: dict[str, Any] = http.get(f"/v1/runs/{run_id}/evaluation", headers=AUTH).json()
        if found.get("status") in ("done", "failed"):
            return found
        assert time.monotonic() < deadline, f"not scored after {RUN_S}s: {found}"
        time.sleep(1.0)


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


#: ~4 min for vehicles on 2 cores: its run's job drains what the 20 s simulation sent
#: (about 2 min, asked by the run once the simulator has finished), then the batch oracle.
GREEN = ["cards", "vehicles"]


@pytest.mark.parametrize("scenario", GREEN)
def test_a_run_started_on_the_panel_is_evaluated_on_the_panel(
    servers: Stack, browser: WebDriver, scenario: str
) -> None:
    http, plan = servers.http, SCENARIOS[scenario]
    started = time.monotonic()
    run_id = start_run(browser, servers, scenario)
    run = http.get(f"/v1/runs/{run_id}", headers=AUTH).json()
    assert run["overrides"]["entities"] == int(plan["sliders"][ENTITIES])
    if not plan["while_running"]:
        run = wait_run(http, run_id, ("finished", "failed", "stopped"))
        assert run["status"] == "finished", run["error"]

    open_page(browser, f"{servers.ui_url}/evaluation?run={run_id}", "Evaluate a run")
    wait_text(browser, run_id, "Not evaluated yet")
    press(browser, "Evaluate")
    if plan["while_running"]:
        wait_text(browser, "waiting for the run to finish")
        run = wait_run(http, run_id, ("finished", "failed", "stopped"))
        assert run["status"] == "finished", run["error"]
    found = wait_scored(http, run_id)
    assert found["status"] == "done", found["error"]
    wait_text(browser, f"run {run_id}", "Detection quality")  # `code` shows without ticks
    report = found["report"]
    assert report["scenario"] == scenario and report["run"]["id_prefix"]
    scores = report["paths"][plan["path"]]
    label, best = max(scores.items(), key=lambda item: item[1]["support"])
    assert best["support"] > 0, scores  # incidents of the run were scored
    assert best["recall"] is not None and best["f1"] is not None
    # every type in the report's table, and the best-supported one's figures
    wait_text(browser, *scores, fmt(best["recall"]), fmt(best["f1"]))
    charts = "[data-testid='stVegaLiteChart']"
    assert len(browser.find_elements(By.CSS_SELECTOR, charts)) >= 2  # quality, latency
    if scenario == "vehicles":
        assert report["parity"]["windows"] > 0  # the batch oracle over the run's offsets

    # The comparison: the run's row with its knobs and its scores. It renders after the
    # report in the same script run, so it may arrive a moment later.
    row_xpath = f"//table//tr[th[normalize-space(.)='{run_id}']]"
    wait_text(browser, "Run-to-run comparison")
    WebDriverWait(browser, WAIT_S, poll_frequency=0.25).until(
        lambda d: d.find_elements(By.XPATH, row_xpath),
        f"no comparison row for {run_id}",
    )
    row = browser.find_element(By.XPATH, row_xpath)
    cells = row.text
    assert "http" in cells if scenario == "cards" else "30" in cells
    assert fmt(best["recall"]) in cells, cells
    header = browser.find_element(By.XPATH, f"//table[.//th[normalize-space(.)='{run_id}']]")
    assert f"{plan['path']} · {label} · R" in header.text
    shoot(browser, f"screenshots/ui-evaluate-{scenario}.png")
    print(f"{scenario}: {time.monotonic() - started:.0f} s from Start run to the scores")
