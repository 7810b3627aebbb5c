"""The Shipping page in a real headless Chromium, against a real `streamsim api` (with owner
tokens), broker and a small seeded shipping run.

- `streamsim simulate` writes the run (4 ships, 200 boxes, 4 simulated days, voyages held on
  board and flushed in port) to the session's broker; the test reads the run's records back
  (from where the topics ended before it, its own run id only: the shipping topics are
  shared) for what the page must show;
- one shipping alert, in the pipeline's format, for a box of the run that raised a
  temperature alarm by satellite;
- the page shows the run's ships on the map with their tracks, the ports with ships in dock,
  the backlog held on board per ship with boxes aboard and satellite alarms (the API's
  figures, which the test checks against the run's records), and the alert; with owner A's
  token typed in, a container's timeline across its ships, and none of owner B's boxes.
A screenshot goes to .data/screenshots/ui-shipping.png.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from confluent_kafka import Producer

from core.config import StackConfig
from core.kafka import ensure_topics, producer_config
from core.kafka.offsets import end_offsets
from core.kafka.reader import topic_values
from scenarios.shipping.topics import CONTAINERS, POSITIONS
from tests.integration.ui_stack import (
    STREAMSIM,
    WAIT_S,
    By,
    Stack,
    WebDriver,
    WebDriverWait,
    open_page,
    shoot,
    wait_text,
)
from tests.shipping_run import small_shipping

pytestmark = pytest.mark.integration
pytest_plugins = ("tests.integration.ui_stack",)

A, B = "bigblue", "duckworks"
TOKENS = {A: "ui-owner-a-token-0123456789", B: "ui-owner-b-token-9876543210"}
BOXES = 200


@pytest.fixture(scope="module")
def api_env() -> dict[str, str]:
    """The module's API knows both owners' tokens."""
    return {"STREAMSIM_OWNER_TOKENS": orjson.dumps(TOKENS).decode()}


def simulate(tmp_path: Path, stack_file: Path) -> str:
    """A small seeded shipping run of a new run id, on the stack of `stack_file` (the servers'
    broker); its event-id prefix."""
    data = small_shipping(f"ui{uuid.uuid4().hex[:8]}")
    data.update(duration_s=4 * 86_400.0, entities=4 + BOXES + 30)  # ~40k events, ~10 s
    data["classes"][1]["share"] = BOXES
    scenario = tmp_path / "shipping.yaml"
    scenario.write_text(yaml.safe_dump(data))
    done = subprocess.run(
        [STREAMSIM, "simulate", str(scenario), "--speed", "max", "--json",
         "--config", str(stack_file)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    summary = orjson.loads(done.stdout.strip().splitlines()[-1])
    assert summary["events"] > 20_000, summary
    return str(summary["id_prefix"])


def ours(values: Iterable[bytes | None], prefix: str) -> list[bytes]:
    """The values that can be the run's: other tests share the topics, some write malformed
    records on purpose."""
    return [v for v in values if v and prefix.encode() in v]


def of_run(
    stack: StackConfig, topic: str, prefix: str, since: dict[int, int]
) -> list[dict[str, Any]]:
    """The run's records of `topic`, read from the offsets `since` (where it began)."""
    values = (v for batch in topic_values(stack, topic, since) for v in batch)
    return [r for r in map(orjson.loads, ours(values, prefix)) if r["event_id"].startswith(prefix)]


def caught_up(stack: Stack, run: str, ships: set[str], written_ms: int) -> dict[str, Any]:
    """The API's fleet once it shows the run's ships and has read the topics to their end as
    of `written_ms` or later (a lag of 0 counts to the ends read at `lag_as_of`: the run's last
    voyage flush may land after)."""
    deadline = time.monotonic() + WAIT_S
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        body = stack.http.get("/v1/shipping/fleet", params={"run": run}).json()
        source = body["source"]
        if (
            source["lag"] == 0
            and (source["lag_as_of"] or 0) >= written_ms
            and {s["ship_id"] for s in body["ships"]} == ships
        ):
            return body
        time.sleep(0.5)
    raise AssertionError(f"the fleet never caught up: {body.get('source')}")


def publish_alert(stack: StackConfig, reading: dict[str, Any]) -> str:
    """A reefer-failure alert as the shipping job writes it, for the reading's box."""
    ensure_topics(stack, ["alerts"])
    alert_id = f"ui-ship-{uuid.uuid4().hex[:8]}"
    alert = {
        "alert_id": alert_id,
        "rule": "reefer_drift",
        "label": "reefer_failure",
        "entity_id": reading["container_id"],
        "event_time": reading["event_time"],
        "event_ids": [reading["event_id"]],
        "evidence": orjson.dumps(
            {"temp_c": reading["temp_c"], "setpoint_c": reading["setpoint_c"]}
        ).decode(),
        "source": "pipeline",
        "job": "shipping",
        "detected_at": time.time_ns() // 1_000_000,
        "late": True,
        "late_by_ms": 2 * 86_400_000,
    }
    producer = Producer(producer_config(stack))
    producer.produce("alerts", orjson.dumps(alert), reading["container_id"].encode())
    assert producer.flush(30) == 0
    return alert_id


def test_shipping_page_in_a_real_browser(
    kafka_stack: StackConfig, servers: Stack, browser: WebDriver, tmp_path: Path
) -> None:
    ensure_topics(kafka_stack, [POSITIONS, CONTAINERS])
    before = {topic: end_offsets(kafka_stack, topic) for topic in (POSITIONS, CONTAINERS)}
    prefix = simulate(tmp_path, servers.stack_file)
    written_ms = time.time_ns() // 1_000_000  # the run is in the topics
    run = prefix.rstrip("-")
    positions = of_run(kafka_stack, POSITIONS, prefix, before[POSITIONS])
    readings = of_run(kafka_stack, CONTAINERS, prefix, before[CONTAINERS])
    ships = {p["ship_id"] for p in positions}
    assert len(ships) == 4
    onboard: dict[str, int] = defaultdict(int)
    for r in positions + readings:
        if r["channel"] == "onboard" and r.get("ship_id"):
            onboard[r["ship_id"]] += 1
    sat_alarms: dict[str, int] = defaultdict(int)
    newest: dict[str, dict[str, Any]] = {}
    for r in readings:
        if r["channel"] == "satellite" and r["alarm"] != "none":
            sat_alarms[r["ship_id"]] += 1
        if r["event_time"] >= newest.get(r["container_id"], r)["event_time"]:
            newest[r["container_id"]] = r
    aboard: dict[str, int] = defaultdict(int)
    for r in newest.values():
        if r["ship_id"] and r["port"] is None:
            aboard[r["ship_id"]] += 1
    alarms = [r for r in readings if r["channel"] == "satellite" and r["alarm"] == "temperature"]
    assert alarms
    alarmed = alarms[0]
    publish_alert(kafka_stack, alarmed)

    fleet = caught_up(servers, run, ships, written_ms)
    # The backlog is the run's: its onboard records, held for days (voyages flush in port).
    for ship in fleet["ships"]:
        assert ship["onboard_records"] == onboard[ship["ship_id"]] > 0, ship
        assert ship["satellite_alarms"] == sat_alarms[ship["ship_id"]], ship
        assert ship["boxes_aboard"] == aboard[ship["ship_id"]], ship
        assert ship["peak_held"] > 0 and ship["mean_delay_h"] > 12, ship
        assert len(ship["track"]) >= 2
    assert sum(aboard.values()) > 0 and sum(sat_alarms.values()) > 0
    docked = [p for p in fleet["ports"] if p["ships_in_dock"]]
    at_sea = [s for s in fleet["ships"] if s["status"] == "at_sea"]
    assert docked or at_sea

    mine = {r["container_id"] for r in readings if r["owner"] == A}
    theirs = {r["container_id"] for r in readings if r["owner"] == B}
    assert mine and theirs

    browser.set_window_size(1400, 3400)  # the whole page in the picture
    open_page(browser, f"{servers.ui_url}/shipping", "Shipping")
    # Ships, figures, ports, backlog: the run's, the newest read.
    text = wait_text(
        browser, f"Run {run}", "Ships", "At sea", "Backlog waiting on board", *sorted(ships)
    )
    for ship_id in ships:  # each ship's line: where it is and its boxes aboard, the run's
        lines = [x for x in text.splitlines() if x.startswith(ship_id) and "boxes aboard" in x]
        assert any(x.endswith(f"· {aboard[ship_id]} boxes aboard") for x in lines), lines
    for port in docked:
        assert port["port"] in text and port["ships_in_dock"][0] in text
    WebDriverWait(browser, WAIT_S).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid='stDeckGlJsonChart'] canvas")
    )
    # The alert (late, with its evidence).
    wait_text(
        browser,
        f"reefer_failure · {alarmed['container_id']}",
        "late by 48.0 h",
        f"setpoint_c: {alarmed['setpoint_c']:g}",
    )

    # A container's timeline, with owner A's token: A's boxes only.
    field = browser.find_element(By.XPATH, "//input[@aria-label='Owner token']")
    field.send_keys(TOKENS[A] + "\n")
    text = wait_text(browser, f"Owner {A}", "Timeline of", "Port events", "Newest readings")
    text = text.split("Container timeline", 1)[1]  # the alerts above are open to all
    box = text.split("Timeline of ", 1)[1].split(" ", 1)[0]
    assert box in mine, box
    legs = {r["ship_id"] for r in readings if r["container_id"] == box and r["ship_id"]}
    assert all(ship in text for ship in legs), (box, legs)
    assert not any(other in text for other in theirs)
    WebDriverWait(browser, WAIT_S).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "[data-testid='stVegaLiteChart']")) >= 2
    )
    time.sleep(1.5)  # let WebGL and Vega paint before the picture (not an assertion)
    shoot(browser, "screenshots/ui-shipping.png")
