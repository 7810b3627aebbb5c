"""The shipping scenario against a real broker: each event in its topic under its DESIGN key
(positions by ship, readings by container, port events by port), at its emit time, and the
truth of every one in truth.<name>.

The three topics have fixed names that other tests write too: the test reads them from where
they ended before its run, and keeps only its own run's events."""

from __future__ import annotations

import uuid
from collections import Counter
from itertools import chain
from pathlib import Path

import orjson
import pytest

from core.config import StackConfig
from core.config.loader import load_model
from core.kafka.admin import admin_client
from core.kafka.offsets import end_offsets
from core.kafka.reader import topic_messages
from scenarios.catalog import ScenarioConfig, run_scenario
from scenarios.shipping.topics import CONTAINERS, PORT_EVENTS, POSITIONS
from simulators.sinks.kafka import KafkaSink
from streamsim.verify.readers import consume_topic

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
KEYS = {POSITIONS: "ship_id", CONTAINERS: "container_id", PORT_EVENTS: "port"}


def test_three_topics_keyed_per_design(kafka_stack: StackConfig) -> None:
    data = load_model(ScenarioConfig, REPO / "config/scenarios/shipping.yaml").model_dump(
        mode="json"
    )
    tag = uuid.uuid4().hex[:8]
    data.update(
        name=f"it_ship_{tag}",
        run_id=tag,  # ids of this run only, on topics other runs may share
        entities=2 + 120 + 30,
        classes=[
            {"name": "ship", "share": 2},
            {"name": "container", "share": 120},
            {"name": "port", "share": 30},
        ],
    )
    data["domain"]["capacity"] = 60
    cfg = ScenarioConfig.model_validate(data)
    before = {topic: ends_now(kafka_stack, topic) for topic in KEYS}
    summary = run_scenario(cfg, KafkaSink(kafka_stack), duration_s=1.5 * 86_400, speed="max")
    assert summary.failed == 0 and summary.events > 1000

    in_topics: Counter[tuple[str, int]] = Counter()
    for topic, key_field in KEYS.items():
        for msg in chain.from_iterable(topic_messages(kafka_stack, topic, before[topic])):
            value = msg.value()
            if not value or summary.id_prefix.encode() not in value:
                continue  # another test's record, maybe a malformed one on purpose
            event = orjson.loads(value)
            if not event["event_id"].startswith(summary.id_prefix):
                continue  # another run's
            assert (msg.key() or b"").decode() == event[key_field]
            in_topics[(event["event_id"], msg.timestamp()[1])] += 1
    assert sum(in_topics.values()) == summary.events
    truth = [orjson.loads(v) for v in consume_topic(kafka_stack, f"truth.{cfg.name}").values]
    assert len(truth) == summary.truth
    assert Counter((t["event_id"], t["emit_time"]) for t in truth) == in_topics
    assert any(t["outage_id"] for t in truth)  # voyage data, held and flushed in port


def ends_now(stack: StackConfig, topic: str) -> dict[int, int]:
    """`topic`'s end offsets now, per partition; none if it does not exist yet."""
    if topic not in admin_client(stack).list_topics(timeout=10).topics:
        return {}
    return end_offsets(stack, topic)
