"""The Runs page's live pacing form in headless Chromium: a running run's rate cap moved on the
page reaches the run (its control file) through `PATCH /v1/control/runs/{id}/pacing`."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from runs.manager import CONTROL_FILE
from tests.integration.ui_stack import (
    TOKEN,
    WAIT_S,
    ActionChains,
    By,
    Keys,
    Stack,
    WebDriver,
    WebDriverWait,
    click_button,
    open_page,
    shoot,
    wait_text,
)

pytest_plugins = ("tests.integration.ui_stack",)
pytestmark = pytest.mark.integration

AUTH = {"Authorization": f"Bearer {TOKEN}"}
CAP_SLIDER = "//input[@type='range' and @aria-label='Cap on events/s (live)']"


def test_a_cap_moved_on_the_page_reaches_the_running_run(
    servers: Stack, browser: WebDriver
) -> None:
    http = servers.http
    body = {
        "scenario": "sensors",
        "speed": "max",
        "duration_s": 3600,
        "overrides": {"entities": 20, "pacing": {"max_rate": 20}},
        "components": ["simulator"],  # the subject is pacing: no Spark job to drain and stop
    }
    started = http.post("/v1/control/runs", json=body, headers=AUTH)
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]
    open_page(browser, f"{servers.ui_url}/runs?scenario=sensors", "Scenario runs")
    wait_text(browser, run_id, "Speed (live)", "Cap on events/s (live)")
    thumb = browser.find_element(By.XPATH, CAP_SLIDER)
    assert thumb.get_attribute("aria-valuetext") == "20"  # the run's own cap
    browser.execute_script("arguments[0].focus();", thumb)  # a visually hidden range input
    ActionChains(browser).send_keys(Keys.ARROW_RIGHT).perform()  # the next step: 50 events/s
    WebDriverWait(browser, WAIT_S, poll_frequency=0.2).until(
        lambda d: d.find_element(By.XPATH, CAP_SLIDER).get_attribute("aria-valuetext") == "50",
        "the cap slider did not move",
    )

    def sent(_: WebDriver) -> bool:
        run = http.get(f"/v1/runs/{run_id}", headers=AUTH).json()
        return bool(run["live"] == {"max_rate": 50.0})

    click_button(browser, "Apply", sent)
    run = http.get(f"/v1/runs/{run_id}", headers=AUTH).json()
    assert run["status"] == "running"
    control = orjson.loads((Path(run["workdir"]) / CONTROL_FILE).read_bytes())
    assert control == {"max_rate": 50.0}
    shoot(browser, "ui-screenshot-runs-live.png")
    stopped = http.delete(f"/v1/control/runs/{run_id}", headers=AUTH)
    assert stopped.json()["status"] == "stopped"
