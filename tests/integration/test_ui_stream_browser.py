"""Alerts pushed to the open panel in a real headless Chromium: the Alerts page is open (its
EventSource on the API's `/v1/stream/alerts` connected), a marker is set in the page and in
the component, an alert is written to Kafka in the pipeline's format, and it shows in the
page's live list with both markers still there: no page reload, no rerun of the component.

Against a real `streamsim api` and `streamlit run ui/app.py` on the session broker (the
module's `servers`); the alert has ids of its own (the `alerts` topic is shared). The wait is
generous (no wall-time assertion). A screenshot goes to .data/ui-screenshot-alerts-live.png.
"""

from __future__ import annotations

import time
import uuid

import orjson
import pytest
from confluent_kafka import Producer

from core.config import StackConfig
from core.contracts import topics
from core.kafka import ensure_topics, producer_config
from tests.integration.ui_stack import (
    WAIT_S,
    By,
    Stack,
    WebDriver,
    WebDriverWait,
    open_page,
    shoot,
    wait_text,
)

pytestmark = pytest.mark.integration
pytest_plugins = ("tests.integration.ui_stack",)

ALERTS = topics.ALERTS.name
MARK = "window.__sseMark"


def live_frame(driver: WebDriver) -> bool:
    """Switch into the live-alerts component once it says it is connected."""
    driver.switch_to.default_content()
    for frame in driver.find_elements(By.TAG_NAME, "iframe"):
        if "/v1/stream/alerts" not in (frame.get_attribute("srcdoc") or ""):
            continue
        driver.switch_to.frame(frame)
        state = driver.find_elements(By.ID, "state")
        if state and state[0].text.startswith("live"):
            return True
        driver.switch_to.default_content()
    return False


def test_an_alert_written_to_kafka_shows_on_the_open_alerts_page(
    servers: Stack, browser: WebDriver, kafka_stack: StackConfig
) -> None:
    ensure_topics(kafka_stack, [ALERTS])
    open_page(browser, f"{servers.ui_url}/alerts", "Alerts")
    wait_text(browser, "New alerts appear here as they land")
    WebDriverWait(browser, WAIT_S, poll_frequency=0.25).until(live_frame)
    browser.execute_script(f"{MARK} = 'component';")  # inside the component's frame
    browser.switch_to.default_content()
    browser.execute_script(f"{MARK} = 'page';")

    tag = uuid.uuid4().hex[:8]
    alert = {
        "alert_id": f"ui-sse-{tag}",
        "rule": "velocity",
        "label": "card_testing",
        "entity_id": f"tok_sse_{tag}",
        "event_time": int(time.time() * 1000),
        "event_ids": [f"cv-sse-{tag}-1", f"cv-sse-{tag}-2"],
        "evidence": orjson.dumps({"tx_count": 11, "min_count": 5}).decode(),
        "source": "pipeline",
        "job": "cards",
        "detected_at": int(time.time() * 1000),
    }
    producer = Producer(producer_config(kafka_stack))
    written = time.monotonic()
    producer.produce(ALERTS, orjson.dumps(alert), str(alert["entity_id"]).encode())
    assert producer.flush(30) == 0

    events = f"events: cv-sse-{tag}-1, cv-sse-{tag}-2"
    WebDriverWait(browser, WAIT_S, poll_frequency=0.1).until(
        lambda d: live_frame(d) and events in d.find_element(By.ID, "alerts").text
    )
    print(f"alert shown {time.monotonic() - written:.2f} s after its write (not asserted)")
    card = browser.find_element(By.CSS_SELECTOR, f"[data-alert-id='ui-sse-{tag}']").text
    assert "velocity · label card_testing" in card and "tx_count: 11" in card, card
    assert browser.execute_script(f"return {MARK};") == "component"  # the frame was kept
    browser.switch_to.default_content()
    assert browser.execute_script(f"return {MARK};") == "page"  # the page was not reloaded
    shoot(browser, "ui-screenshot-alerts-live.png")
