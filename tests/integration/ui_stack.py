"""What the browser tests of the control panel share: a real `streamsim api` (with a control
token) and `streamlit run ui/app.py` on the session's broker, headless Chromium driven by
selenium, and waits that poll the page's visible text.

- `browser`: one Chromium per test module (`chromium`), handed to each test on a blank page at
  the default window size (a new one if the last test left it dead);
- `servers`: one API and panel per test module (`module_servers`); the runs a test leaves going
  are stopped after it. Its tests filter what they read by their own run, alert or query ids;
- `fresh_servers`: an API and panel of the test's own, for a test that asserts on a new
  server's whole state (its runs list, its request count, no evaluation or report yet).
`api_env` (module scope) adds to the API's environment; a module overrides it.

Test modules load it with `pytest_plugins = ("tests.integration.ui_stack",)` and import the
helpers.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import httpx
import pytest

from core.config import StackConfig
from tests.conftest import REPO_ROOT, STREAMSIM, free_port
from tests.integration.panel_api import stop_runs

#: Under CI (`CI` set, as `.ci/run` runs) the browser tests must run: a missing browser, driver
#: or selenium fails them instead of skipping them.
IN_CI = bool(os.environ.get("CI"))
webdriver: Any = (
    importlib.import_module("selenium.webdriver")
    if IN_CI
    else pytest.importorskip("selenium.webdriver")
)
from selenium.common.exceptions import (  # noqa: E402
    ElementClickInterceptedException,
    ElementNotInteractableException,
    NoSuchElementException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains as ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys as Keys  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

# Found on PATH, as `.ci/run` checks them (`command -v`), not at fixed paths.
CHROMEDRIVER = shutil.which("chromedriver")
CHROMIUM = next(
    filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None
)
SECRET = "ui-test-pan-secret-0123456789"
TOKEN = "ui-test-control-token"
WAIT_S = 60
#: Chromium's window size at the start of each test (a test may make it taller).
WINDOW = (1400, 1500)
SCREENSHOTS = REPO_ROOT / ".data"


def wait_http(
    url: str, ok: Callable[[httpx.Response], bool], proc: subprocess.Popen[bytes], log: Path
) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{url}: the server exited:\n{log.read_text()}"
        try:
            if ok(httpx.get(url, timeout=5)):
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} not ready after {WAIT_S}s:\n{log.read_text()}")


@dataclass
class Stack:
    api_url: str
    ui_url: str
    data: Path
    activity_topic: str
    http: httpx.Client
    stack_file: Path  # the API's stack file: the session's broker, the API's data folder


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


#: Tries at a free port for the panel: another process may take the one `free_port` saw free
#: before Streamlit binds it ("Port N is not available").
UI_PORT_TRIES = 3


def start_ui(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`streamlit run ui/app.py`, headless, on a free port; (the process, its URL) once its
    health answers. A port taken before Streamlit binds it is retried on another."""
    for _ in range(UI_PORT_TRIES):
        port = free_port()
        with log.open("ab") as out:
            ui = subprocess.Popen(
                [sys.executable, "-m", "streamlit", "run", "ui/app.py",
                 "--server.headless", "true", "--server.port", str(port),
                 "--server.address", "127.0.0.1", "--server.fileWatcherType", "none",
                 "--browser.gatherUsageStats", "false"],
                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT,
            )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            wait_http(f"{url}/_stcore/health", lambda r: r.status_code == 200, ui, log)
            return ui, url
        except AssertionError:
            stop(ui)
            if f"Port {port} is not available" not in log.read_text():
                raise
    raise AssertionError(f"no free port for the panel in {UI_PORT_TRIES} tries:\n{log.read_text()}")


def start_servers(kafka_stack: StackConfig, work: Path, api_env: dict[str, str]) -> Iterator[Stack]:
    """`streamsim api` (with a control token) and `streamlit run ui/app.py`, both headless,
    their files under `work`; stopped after."""
    topic = f"cards.activity-ui-{uuid.uuid4().hex[:8]}"
    data = work / "data"
    api_port = free_port()
    stack_file = work / "stack.yaml"
    stack_file.write_text(
        f"kafka:\n  bootstrap: {kafka_stack.kafka.bootstrap_servers}\n"
        f"dirs:\n  data: {data}\n"
        f"api:\n  port: {api_port}\n"
    )
    settings_file = work / "api.yaml"
    settings_file.write_text(f"kind: api\ntopic: {topic}\nrebuild_timeout_s: 30\n")
    env = {
        **os.environ,
        "STREAMSIM_PAN_SECRET": SECRET,
        "STREAMSIM_API_TOKEN": TOKEN,
        "PYTHONUNBUFFERED": "1",
    }
    api_log, ui_log = work / "api.log", work / "ui.log"
    api_url = f"http://127.0.0.1:{api_port}"
    with api_log.open("ab") as out:
        api = subprocess.Popen(
            [STREAMSIM, "api", "--config", str(stack_file), "--settings", str(settings_file),
             "--no-access-log"],
            stdout=out, stderr=subprocess.STDOUT, env={**env, **api_env}, cwd=REPO_ROOT,
        )  # fmt: skip
    ui = None
    http = httpx.Client(base_url=api_url, timeout=30)
    try:
        wait_http(
            f"{api_url}/v1/health",
            lambda r: r.json()["state"]["status"] == "live",
            api,
            api_log,
        )
        ui_env = {k: v for k, v in env.items() if k != "STREAMSIM_PAN_SECRET"}
        ui_env["STREAMSIM_API_URL"] = api_url
        ui, ui_url = start_ui(ui_env, ui_log)
        yield Stack(api_url, ui_url, data, topic, http, stack_file)
    finally:
        stop_runs(http, TOKEN)
        http.close()
        if ui is not None:
            stop(ui)
        stop(api, signal.SIGINT)


@pytest.fixture(scope="module")
def api_env() -> dict[str, str]:
    """More environment for `streamsim api` (a test module overrides it, e.g. owner tokens)."""
    return {}


@pytest.fixture(scope="module")
def module_servers(
    kafka_stack: StackConfig, tmp_path_factory: pytest.TempPathFactory, api_env: dict[str, str]
) -> Iterator[Stack]:
    """The API and the panel, one pair for the module's tests (through `servers`)."""
    yield from start_servers(kafka_stack, tmp_path_factory.mktemp("servers"), api_env)


@pytest.fixture
def servers(module_servers: Stack) -> Iterator[Stack]:
    """The module's API and panel; the runs the test leaves going are stopped after it, so the
    next test starts with none. The module's tests share its runs list, stats, evaluations and
    load-test reports: each reads its own by id."""
    yield module_servers
    stop_runs(module_servers.http, TOKEN)


@pytest.fixture
def fresh_servers(
    kafka_stack: StackConfig, tmp_path: Path, api_env: dict[str, str]
) -> Iterator[Stack]:
    """An API and a panel of the test's own, for a test that asserts on a new server's whole
    state: its runs list, its request count from 0, no evaluation or load-test report yet."""
    yield from start_servers(kafka_stack, tmp_path, api_env)


def missing(reason: str) -> NoReturn:
    """Skip for want of a browser, or fail under CI, where the browser tests must run."""
    if IN_CI:
        pytest.fail(f"{reason}; CI is set, so the browser tests must run")
    pytest.skip(reason)


def start_chromium(profiles: Path) -> WebDriver:
    """Headless Chromium with a new profile under `profiles`."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-', dir=profiles)}",
    ):
        options.add_argument(arg)
    driver: WebDriver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT_S)
    return driver


def blank(driver: WebDriver) -> WebDriver:
    """`driver` on a blank page (the last page's Streamlit session ends) at the default size."""
    driver.get("about:blank")
    driver.set_window_size(*WINDOW)
    return driver


class Chromium:
    """One headless Chromium for a module's tests, started on first use."""

    def __init__(self, profiles: Path) -> None:
        self.profiles = profiles
        self.driver: WebDriver | None = None

    def page(self) -> WebDriver:
        """The browser, blank (`blank`). One that no longer answers (it crashed in the last
        test) is replaced, so that a test does not fail for the one before it."""
        if self.driver is not None:
            try:
                return blank(self.driver)
            except WebDriverException:
                self.quit()
        self.driver = start_chromium(self.profiles)
        return blank(self.driver)

    def quit(self) -> None:
        if self.driver is not None:
            with contextlib.suppress(WebDriverException):
                self.driver.quit()
            self.driver = None


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    """The module's Chromium (fails under CI, skips elsewhere, if it is not installed)."""
    if CHROMEDRIVER is None or CHROMIUM is None:
        missing("chromium and chromium-driver are not on PATH (apt-get install -y ...)")
    shared = Chromium(tmp_path_factory.mktemp("chromium"))
    try:
        yield shared
    finally:
        shared.quit()


@pytest.fixture
def browser(chromium: Chromium) -> WebDriver:
    """The module's Chromium, on a blank page at the default window size."""
    return chromium.page()


# -- helpers ---------------------------------------------------------------------------------


def body_text(driver: WebDriver) -> str:
    try:
        return str(driver.find_element(By.TAG_NAME, "body").text)
    except (StaleElementReferenceException, WebDriverException):
        return ""


def wait_text(driver: WebDriver, *needles: str, timeout_s: float = WAIT_S) -> str:
    """Wait until the page's visible text holds every needle; returns that text."""
    seen = ""

    def ready(d: WebDriver) -> bool:
        nonlocal seen
        seen = body_text(d)
        return all(n in seen for n in needles)

    try:
        WebDriverWait(driver, timeout_s, poll_frequency=0.25).until(ready)
    except Exception as exc:
        raise AssertionError(
            f"{needles} not on {driver.current_url}; the page says:\n{seen}"
        ) from exc
    return seen


def open_page(driver: WebDriver, url: str, heading: str) -> None:
    """Open `url` and log in: with a control token set, the panel shows only its login form
    until the token is typed, and each page load is a new session."""
    driver.get(url)
    log_in(driver)
    wait_text(driver, heading)


def log_in(driver: WebDriver, token: str = TOKEN) -> None:
    """Type `token` into the panel's login form and submit it."""
    wait_text(driver, "Control token")
    field = driver.find_element(By.CSS_SELECTOR, "input[type='password']")
    field.send_keys(token)
    click_button(driver, "Log in", lambda d: "Control token" not in body_text(d))


def button_xpath(label: str) -> str:
    """A Streamlit button by its label (the label sits in a `<p>` inside the button)."""
    return f"//button[normalize-space(.)='{label}' or .//p[normalize-space(.)='{label}']]"


def click_button(driver: WebDriver, label: str, then: Callable[[WebDriver], bool]) -> None:
    """Click the button labelled `label` until `then` holds (fragments re-render buttons, so a
    click may hit a stale element and is retried)."""
    xpath = button_xpath(label)

    def clicked(d: WebDriver) -> bool:
        if then(d):
            return True
        try:
            button = d.find_element(By.XPATH, xpath)
            d.execute_script("arguments[0].scrollIntoView({block: 'center'});", button)
            button.click()
        except (StaleElementReferenceException, WebDriverException):
            return False
        return then(d)

    WebDriverWait(driver, WAIT_S, poll_frequency=0.5).until(clicked)


def press(driver: WebDriver, label: str) -> None:
    """Click the button labelled `label` once: a second click while the first one's request
    is still under way (a loaded machine) would send it twice."""
    xpath = button_xpath(label)

    def clicked(d: WebDriver) -> bool:
        # Streamlit renders a page's elements one by one: the button may come after the text
        # above it. Each error retried here means the click did not happen.
        button = d.find_element(By.XPATH, xpath)
        d.execute_script("arguments[0].scrollIntoView({block: 'center'});", button)
        button.click()
        return True

    unclicked = (
        NoSuchElementException,
        StaleElementReferenceException,
        ElementClickInterceptedException,
        ElementNotInteractableException,
    )
    WebDriverWait(driver, WAIT_S, poll_frequency=0.25, ignored_exceptions=unclicked).until(
        clicked, f"no {label!r} button to press on {driver.current_url}"
    )


def shoot(driver: WebDriver, name: str) -> None:
    """Save a screenshot as `.data/<name>` (`name` may hold a folder)."""
    (SCREENSHOTS / name).parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / name))


def rate_row(driver: WebDriver, topic: str) -> str:
    for row in driver.find_elements(By.XPATH, f"//tr[.//*[normalize-space(.)='{topic}']]"):
        try:
            return str(row.text)
        except StaleElementReferenceException:
            continue
    return ""


def nonzero_rate(driver: WebDriver, topic: str) -> bool:
    text = rate_row(driver, topic)
    parts = text.split()
    return len(parts) >= 2 and parts[1].endswith("/s") and parts[1] not in ("0.0/s", "—")
