"""The card scenario against real components: a run into the broker (keyed by card token, no PAN
in any topic), and POS mode against a real `streamsim api` server (every transaction gets a
verdict; cards.activity holds one record per transaction, keyed by the same token)."""

from __future__ import annotations

import re
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from core.config import StackConfig
from scenarios.cards.scenario import CardsScenario
from scenarios.catalog import ScenarioConfig, build_scenario, run_scenario
from simulators import Engine
from simulators.sinks.kafka import KafkaSink
from streamsim.verify.readers import consume_topic
from tests.conftest import free_port
from tests.integration.test_api_endpoint import SECRET, Server, read_topic

pytestmark = pytest.mark.integration


def scenario(tag: str, **domain: Any) -> ScenarioConfig:
    return ScenarioConfig.model_validate(
        {
            "name": f"cards_it_{tag}",
            "seed": 9,
            "entities": 600,
            "duration_s": 2 * 3600,
            "tick_s": 30,
            "classes": [
                {
                    "name": "pos_terminal",
                    "clock": {"offset_s": {"type": "uniform", "low": -60, "high": 60}},
                    "delivery": {
                        "outages": {"rate_per_hour": 1, "duration_s": 300},
                        "duplicates": {"probability": 0.02},
                    },
                },
                {"name": "online_gateway"},
            ],
            "domain": {
                "type": "cards",
                "topic": f"cards.transactions-it-{tag}",
                "fraud": {
                    "impossible_travel": {"rate_per_1k_card_hours": 5},
                    "card_testing": {"rate_per_1k_card_hours": 5},
                    "account_takeover": {"rate_per_1k_card_hours": 5},
                    "compromised_terminal": {"rate_per_1k_card_hours": 2},
                },
                **domain,
            },
        }
    )


def pan_runs(values: list[bytes] | list[str]) -> set[bytes]:
    """Every run of 12 to 19 digits (a PAN's shape) in the records."""
    data = b"\n".join(v if isinstance(v, bytes) else v.encode() for v in values)
    return set(re.findall(rb"\d{12,19}", data))


def test_a_run_into_kafka_is_keyed_by_token_and_carries_no_pan(
    kafka_stack: StackConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMSIM_PAN_SECRET", SECRET)
    cfg = scenario(uuid.uuid4().hex[:8])
    summary = run_scenario(cfg, KafkaSink(kafka_stack), speed="max", stack=kafka_stack)
    assert summary.failed == 0 and summary.events > 500 and summary.duplicates > 0

    events = consume_topic(kafka_stack, cfg.domain.topic)
    truth = consume_topic(kafka_stack, f"truth.{cfg.name}")
    assert len(events.values) == summary.events and len(truth.values) == summary.truth
    tokens = set()
    for key, value in zip(events.keys, events.values, strict=True):
        event = orjson.loads(value)
        assert key == event["card_token"] and event["schema"] == "cards.transaction/1"
        tokens.add(event["card_token"])
    labels = Counter(orjson.loads(v)["label"] for v in truth.values)
    assert set(labels) == {
        "none",
        "impossible_travel",
        "card_testing",
        "account_takeover",
        "compromised_terminal",
    }
    # The tokens are the endpoint's; the PANs behind them appear in no record of either topic.
    http_cfg = scenario("pans", delivery="http")
    pans = CardsScenario(http_cfg, kafka_stack).cards.pans or []
    assert tokens <= set(CardsScenario(cfg, kafka_stack).entity_ids)
    records = [*events.values, *events.keys, *truth.values, *truth.keys]
    assert not pan_runs(records) & {p.encode() for p in pans}


def test_pos_mode_gets_a_verdict_for_every_transaction(
    kafka_stack: StackConfig,
    setup: tuple[Path, Path, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack_file, settings_file, activity = setup
    monkeypatch.setenv("STREAMSIM_PAN_SECRET", SECRET)  # the server gets the same key
    stack = StackConfig.model_validate(
        {**kafka_stack.model_dump(mode="json"), "api": {"port": _port(stack_file)}}
    )
    log = tmp_path / "server.log"
    server = Server(stack_file, settings_file, log)
    try:
        cfg = scenario(uuid.uuid4().hex[:8], delivery="http", endpoint={"concurrency": 8})
        engine = Engine(build_scenario(cfg, stack), cfg, KafkaSink(kafka_stack), speed="max")
        summary = engine.run()
        http = summary.details["http"]
        assert summary.failed == 0, summary.errors
        assert http["url"] == f"{server.url}/v1/transactions"
        assert http["requests"] == http["ok"] == summary.events > 300
        assert sum(http["decisions"].values()) == summary.events
        assert set(http["decisions"]) <= {"approve", "review", "decline"}
        assert http["decisions"].get("decline", 0) > 0  # clones and testers do get caught
        truth = [orjson.loads(v) for v in consume_topic(kafka_stack, f"truth.{cfg.name}").values]
        sent = {t["event_id"] for t in truth if t["emit_time"] is not None}
        server.wait_published(len(sent))
    finally:
        assert server.stop() == 0, log.read_text()

    records = read_topic(kafka_stack, activity)
    values = [orjson.loads(v) for _, v, _ in records]
    ids = Counter(v["transaction_id"] for v in values)
    assert set(ids) == sent and set(ids.values()) == {1}  # retries were replays, not republished
    token_of = {t["event_id"]: t["entity_id"] for t in truth}
    for (key, _, _), value in zip(records, values, strict=True):
        assert key.decode() == value["card_token"] == token_of[value["transaction_id"]]
    pans = engine.scenario.cards.pans  # type: ignore[attr-defined]
    everything = [k + v for k, v, _ in records]
    assert not pan_runs(everything) & {p.encode() for p in pans}
    output = log.read_text()
    assert not [p for p in pans[:100] if p in output]


def _port(stack_file: Path) -> int:
    return int(stack_file.read_text().split("port: ")[-1].split()[0])


@pytest.fixture
def setup(kafka_stack: StackConfig, tmp_path: Path) -> tuple[Path, Path, str]:
    """A stack file on the session broker with a free API port, and a fresh activity topic."""
    activity = f"cards.activity-it-{uuid.uuid4().hex[:8]}"
    stack_file = tmp_path / "stack.yaml"
    stack_file.write_text(
        f"kafka:\n  bootstrap: {kafka_stack.kafka.bootstrap_servers}\n"
        f"dirs:\n  data: {tmp_path / 'data'}\n"
        f"api:\n  port: {free_port()}\n"
    )
    settings_file = tmp_path / "api.yaml"
    settings_file.write_text(f"kind: api\ntopic: {activity}\nrebuild_timeout_s: 30\n")
    return stack_file, settings_file, activity
