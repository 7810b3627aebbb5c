"""No full card number anywhere after a POS-mode card demo (issue 13).

`run_demo("cards")`, as `streamsim demo --scenario cards` runs it: the fraud
endpoint in front (a `streamsim api` child), the simulator posting each transaction to it, PAN
included, and the cards job on `cards.activity` writing alerts to Kafka and the lake.
While it runs, hostile clients post card numbers where none belongs (ids written with
separators, unknown fields, a URL path). Afterwards every topic, every log file under the
stack's data directory and every Parquet file of its lake is read (`tests/pan_scan.py`): no
string in them holds a card number, and no digits in them hold one the simulator issued.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.config import StackConfig
from core.config.loader import read_yaml
from pipeline.progress import BatchReport
from runs.overrides import apply_overrides
from scenarios.cards.scenario import CardsScenario
from scenarios.catalog import ScenarioConfig
from streamsim.demo import SCENARIOS, run_demo
from tests.conftest import free_port
from tests.pan_scan import Hit, Scanner, log_files, topic_ends

pytestmark = pytest.mark.integration

SEED = 7313  # its own seed: the session broker may hold other runs' cards
#: Card testing often enough that the job raises alerts (and writes its lake) in a short run.
FRAUD = {
    "card_testing": {"rate_per_1k_card_hours": 20},
    "impossible_travel": {"rate_per_1k_card_hours": 5},
    "account_takeover": {"rate_per_1k_card_hours": 5},
}
#: Card numbers a hostile client writes where no card number belongs.
HOSTILE_PANS = ["4111-1111-1111-1111", "4111.1111.1111.1111", "5555 5555 5555 4444"]
HOSTILE_DIGITS = ["4111111111111111", "5555555555554444"]


def _issued_pans(stack: StackConfig, overrides: dict[str, Any]) -> list[str]:
    """The PANs the demo's simulator posted: its scenario, rebuilt with the same settings."""
    plan = SCENARIOS["cards"]
    data = apply_overrides(read_yaml(plan.scenario), {**plan.overrides, **overrides})
    data["domain"]["delivery"] = "http"
    return CardsScenario(ScenarioConfig.model_validate(data), stack).cards.pans or []


def _hostile(url: str) -> list[int]:
    """Post card numbers in ids, in an unknown field and in a path; the status codes."""
    base = {
        "transaction_id": "tx-hostile",
        "card_number": HOSTILE_DIGITS[0],
        "amount": 1.0,
        "currency": "GBP",
        "merchant_id": "m-1",
        "merchant_category": "5411",
        "channel": "card_present",
        "lat": 51.5,
        "lon": -0.12,
        "country": "GB",
        "event_time": 1_767_225_600_000,
        "terminal_id": "pos-1",
    }
    codes = []
    with httpx.Client(timeout=10) as client:
        for pan in HOSTILE_PANS:
            for field in ("transaction_id", "merchant_id", "terminal_id", "pan_copy"):
                codes.append(client.post(url, json={**base, field: pan}).status_code)
            codes.append(client.get(f"{url}/{pan}").status_code)
    return codes


@pytest.fixture(scope="module")
def demo(kafka_stack: StackConfig, spark: object) -> dict[str, Any]:
    """The demo, then the scan of its stack: topics, logs, lake."""
    stack = kafka_stack.model_copy(
        update={
            "api": kafka_stack.api.model_copy(update={"host": "127.0.0.1", "port": free_port()})
        }
    )
    url = f"http://127.0.0.1:{stack.api.port}/v1/transactions"
    codes: list[int] = []

    def on_batch(_report: BatchReport) -> None:
        if not codes:  # once, while the endpoint runs
            codes.extend(_hostile(url))

    # What the demo wrote: the session's broker and data dir also hold other tests' records.
    data = Path(stack.dirs.data)
    topics_before = topic_ends(stack)
    logs_before = {p: p.stat().st_size for p in log_files(data)}
    started = time.time()
    overrides = {"seed": SEED, "entities": 2000, "domain": {"fraud": FRAUD}}
    result = run_demo(stack, "cards", 20, 90.0, on_batch=on_batch, overrides=overrides)
    pans = _issued_pans(stack, overrides)
    scanner = Scanner(known=[*pans, *HOSTILE_DIGITS])
    topic_hits, records = scanner.topics(stack, since=topics_before)
    log_hits: list[Hit] = []
    lines: dict[str, int] = {}
    for path in log_files(data, skip=(data / "kafka" / "data",)):
        hits, lines[str(path.relative_to(data))] = scanner.log(path, logs_before.get(path, 0))
        log_hits += hits
    lake_hits: list[Hit] = []
    strings: dict[str, int] = {}
    for path in sorted(Path(stack.dirs.lake).rglob("*.parquet")):
        if path.stat().st_mtime < started:
            continue
        hits, strings[str(path)] = scanner.parquet(path)
        lake_hits += hits
    return {
        "result": result,
        "pans": len(pans),
        "codes": codes,
        "records": records,
        "lines": lines,
        "strings": strings,
        "hits": {"topics": topic_hits, "logs": log_hits, "lake": lake_hits},
    }


def test_the_demo_ran_through_the_endpoint(demo: dict[str, Any]) -> None:
    simulation = demo["result"]["simulation"]
    assert simulation["events"] > 500, simulation
    assert demo["records"]["cards.activity"] >= simulation["events"] * 0.9, demo["records"]
    assert demo["records"]["alerts"] > 0, demo["records"]
    assert demo["pans"] == 2000  # one per card: the known-PAN check has its numbers


def test_hostile_card_numbers_were_refused(demo: dict[str, Any]) -> None:
    codes = demo["codes"]
    assert len(codes) == 5 * len(HOSTILE_PANS), codes
    assert all(400 <= c < 500 for c in codes), codes


def test_everything_was_read(demo: dict[str, Any]) -> None:
    lines, strings = demo["lines"], demo["strings"]
    assert any(name.endswith("-api.log") and n > 0 for name, n in lines.items()), lines
    assert lines.get("logs/spark.log", 0) > 0, lines
    assert any(name.endswith("broker.log") and n > 0 for name, n in lines.items()), lines
    assert strings and sum(strings.values()) > 0, strings


def test_no_card_number_in_topics_logs_or_lake(demo: dict[str, Any]) -> None:
    assert demo["hits"] == {"topics": [], "logs": [], "lake": []}
