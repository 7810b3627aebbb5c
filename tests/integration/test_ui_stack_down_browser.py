"""Every page of the control panel in headless Chromium with Kafka down, and the pages fed by a
Spark job with no job running: no traceback, no exception box, and the page says what is down
with the command that starts it.

- Kafka down: a real `streamsim api` whose stack points at a free port where no broker
  listens (it serves, degraded), and `streamlit run ui/app.py` on it; every page of PAGES.
- Job down: the same over the session's broker with no job started; the pages fed by a job.

Screenshots go to `.data/screenshots/kafka-down/` and `.data/screenshots/job-down/`.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from core.config import StackConfig
from tests.conftest import REPO_ROOT, free_port
from tests.integration.test_ui_api_down_browser import CRASH, PAGES
from tests.integration.ui_stack import (
    SECRET,
    STREAMSIM,
    TOKEN,
    WAIT_S,
    By,
    WebDriver,
    body_text,
    open_page,
    shoot,
    start_ui,
    stop,
    wait_http,
    wait_text,
)
from ui.status import JOB_DOWN, KAFKA_DOWN, STALE_S

pytestmark = pytest.mark.integration
pytest_plugins = ("tests.integration.ui_stack",)

#: The pages `ui.app` marks as fed by a Spark job (NEEDS_JOB), by title.
JOB_PAGES = ("Live", "Vehicles", "Shipping", "Sensors", "Alerts")


@dataclass
class Panel:
    ui_url: str
    api: httpx.Client


def start_panel(tmp: os.PathLike[str], bootstrap: str) -> Iterator[Panel]:
    """`streamsim api` on `bootstrap` and the panel on it (both torn down after)."""
    work = Path(tmp)
    api_port = free_port()
    stack_file, settings = work / "stack.yaml", work / "api.yaml"
    stack_file.write_text(
        f"kafka:\n  bootstrap: {bootstrap}\n"
        f"dirs:\n  data: {work / 'data'}\napi:\n  port: {api_port}\n"
    )
    settings.write_text(f"kind: api\ntopic: cards.activity-down-{api_port}\nrebuild_timeout_s: 5\n")
    env = {**os.environ, "STREAMSIM_PAN_SECRET": SECRET, "STREAMSIM_API_TOKEN": TOKEN,
           "PYTHONUNBUFFERED": "1"}  # fmt: skip
    api_log, ui_log = work / "api.log", work / "ui.log"
    with api_log.open("ab") as out:
        api = subprocess.Popen(
            [STREAMSIM, "api", "--config", str(stack_file), "--settings", str(settings),
             "--no-access-log"],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT,
        )  # fmt: skip
    ui = None
    api_url = f"http://127.0.0.1:{api_port}"
    http = httpx.Client(base_url=api_url, timeout=30)
    try:
        wait_http(f"{api_url}/v1/health", lambda r: r.status_code == 200, api, api_log)
        ui_env = {k: v for k, v in env.items() if k != "STREAMSIM_PAN_SECRET"}
        ui_env["STREAMSIM_API_URL"] = api_url
        ui, ui_url = start_ui(ui_env, ui_log)
        yield Panel(ui_url, http)
    finally:
        http.close()
        if ui is not None:
            stop(ui)
        stop(api)
    assert "Traceback" not in api_log.read_text(), api_log.read_text()


@pytest.fixture(scope="module")
def kafka_down(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Panel]:
    yield from start_panel(tmp_path_factory.mktemp("kafka-down"), f"127.0.0.1:{free_port()}")


@pytest.fixture(scope="module")
def job_down(kafka_stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Panel]:
    """Over the session's broker. The feed keeps the last reports of jobs earlier tests ran:
    wait until none is fresher than `STALE_S`, so "no job running" is the truth here."""
    tmp = tmp_path_factory.mktemp("job-down")
    for panel in start_panel(tmp, kafka_stack.kafka.bootstrap_servers):
        deadline = time.monotonic() + STALE_S + WAIT_S
        while True:
            health = panel.api.get("/v1/health").json()
            queries = panel.api.get("/v1/pipeline").json()["queries"]
            ages = [q.get("report_age_s") for q in queries]
            fresh = any(isinstance(a, int | float) and a <= STALE_S for a in ages)
            if health["kafka"]["connected"] and not fresh:
                break
            assert time.monotonic() < deadline, (health, queries)
            time.sleep(1.0)
        yield panel


def check_page(browser: WebDriver, url: str, title: str, *needles: str, shot: str) -> None:
    open_page(browser, url, title)
    wait_text(browser, *needles)
    main = browser.find_element(By.CSS_SELECTOR, "section.main, [data-testid='stMain']")
    for needle in needles:
        assert needle in main.text, f"{title}: the page itself does not say {needle!r}"
    shoot(browser, shot)
    text = body_text(browser)
    for crash in CRASH:
        assert crash not in text, f"{title} shows {crash!r}:\n{text}"
    boxes = browser.find_elements(By.CSS_SELECTOR, "[data-testid='stException']")
    assert not boxes, f"{title} shows an exception box: {boxes[0].text}"


@pytest.mark.parametrize(("title", "path"), PAGES, ids=[t for t, _ in PAGES])
def test_every_page_says_kafka_is_down_and_how_to_start_it(
    kafka_down: Panel, browser: WebDriver, title: str, path: str
) -> None:
    check_page(browser, f"{kafka_down.ui_url}/{path}", title, KAFKA_DOWN, "streamsim kafka up",
               shot=f"screenshots/kafka-down/{path or 'live'}.png")  # fmt: skip


@pytest.mark.parametrize(
    ("title", "path"),
    [(t, p) for t, p in PAGES if t in JOB_PAGES],
    ids=[t for t, _ in PAGES if t in JOB_PAGES],
)
def test_pages_fed_by_a_job_say_none_runs_and_how_to_start_one(
    job_down: Panel, browser: WebDriver, title: str, path: str
) -> None:
    check_page(browser, f"{job_down.ui_url}/{path}", title, JOB_DOWN, "streamsim pipeline run",
               shot=f"screenshots/job-down/{path or 'live'}.png")  # fmt: skip
    assert KAFKA_DOWN not in body_text(browser)


def test_the_job_pages_are_the_apps() -> None:
    """JOB_PAGES here names the pages `ui.app` marks NEEDS_JOB (read from its source)."""
    source = (REPO_ROOT / "ui" / "app.py").read_text()
    assert "NEEDS_JOB = (live, vehicles, shipping, sensors, alerts)" in source
    assert {t for t, _ in PAGES} >= set(JOB_PAGES)
