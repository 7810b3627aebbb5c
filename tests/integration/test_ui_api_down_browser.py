"""Every page of the control panel in headless Chromium with the API down: no traceback, no
exception box, and the page says the API is down with the command that starts it.

Only `streamlit run ui/app.py` runs, pointed (STREAMSIM_API_URL) at a free port where nothing
listens. The pages come from `ui/app.py`'s PAGES as written, so a page added there is covered
without touching this test. A screenshot of each goes to `.data/screenshots/api-down/`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest

from tests.conftest import REPO_ROOT, free_port
from tests.integration.ui_stack import (
    TOKEN,
    By,
    WebDriver,
    body_text,
    open_page,
    shoot,
    start_ui,
    stop,
    wait_text,
)

pytestmark = pytest.mark.integration
pytest_plugins = ("tests.integration.ui_stack",)

#: `(module, "Title", None | "url_path", icon)` rows of `PAGES` in ui/app.py.
PAGE_ROW = re.compile(r'^\s*\((\w+), "([^"]+)", (None|"[\w-]+"), ', re.MULTILINE)
PAGES = [
    (title, "" if path == "None" else path.strip('"'))
    for _, title, path in PAGE_ROW.findall((REPO_ROOT / "ui" / "app.py").read_text())
]
#: What a page must never show: Python's traceback, or Streamlit's exception box.
CRASH = ("Traceback (most recent call last)", 'File "/')


def test_the_page_list_is_read_from_the_app() -> None:
    titles = [title for title, _ in PAGES]
    assert titles[0] == "Live" and {"Runs", "Evaluation", "Vehicles"} <= set(titles), titles


@pytest.fixture(scope="module")
def panel_without_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`streamlit run ui/app.py` pointed at a port where no API listens (one for all pages)."""
    tmp_path = tmp_path_factory.mktemp("panel-api-down")
    dead_port = free_port()
    env = {
        **os.environ,
        "STREAMSIM_API_URL": f"http://127.0.0.1:{dead_port}",
        "STREAMSIM_API_TOKEN": TOKEN,
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("STREAMSIM_PAN_SECRET", None)
    log = tmp_path / "ui.log"
    ui, url = start_ui(env, log)
    try:
        yield url
    finally:
        stop(ui)


@pytest.mark.parametrize(("title", "path"), PAGES, ids=[t for t, _ in PAGES])
def test_every_page_says_the_api_is_down_and_how_to_start_it(
    panel_without_api: str, browser: WebDriver, title: str, path: str
) -> None:
    open_page(browser, f"{panel_without_api}/{path}", "API down")
    main = browser.find_element(By.CSS_SELECTOR, "section.main, [data-testid='stMain']")
    wait_text(browser, "API down", "streamsim api")
    text = body_text(browser)
    shoot(browser, f"screenshots/api-down/{path or 'live'}.png")
    assert "streamsim api" in main.text, f"{title}: the page itself names no start command"
    for crash in CRASH:
        assert crash not in text, f"{title} shows {crash!r}:\n{text}"
    boxes = browser.find_elements(By.CSS_SELECTOR, "[data-testid='stException']")
    assert not boxes, f"{title} shows an exception box: {boxes[0].text}"
