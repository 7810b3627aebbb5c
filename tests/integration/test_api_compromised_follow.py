"""The endpoint follows `cards.compromised-cards` on a real broker: a filter published there
reaches `CompromisedCards` and sends the card's next online purchase to review."""

from __future__ import annotations

import time
import uuid

import orjson
from confluent_kafka import Producer

from api.fraud.compromised import CompromisedCards, CompromisedUpdater
from core.config import StackConfig
from core.contracts.compromised import SCHEMA
from core.kafka import ensure_topics
from core.kafka.clients import producer_config
from detectors.cards.bloom import CompromisedCardParams, SparkBloomFilter

T0 = 1_767_225_600_000
CARD = "tok_" + "5e" * 16


def record(terminal: str, window_end: int, tokens: list[str]) -> bytes:
    p = CompromisedCardParams()
    bloom = SparkBloomFilter.create(p.expected_items, p.fpp)
    for token in tokens:
        bloom.put_token(token)
    return orjson.dumps(
        {
            "schema": SCHEMA,
            "terminal_id": terminal,
            "window_start": window_end - 600_000,
            "window_end": window_end,
            "distinct_cards": len(tokens),
            "tx_count": len(tokens),
            "first_crossing": True,
            "filter": bloom.to_base64(),
            "item": "token_key",
            "fpp": p.fpp,
            "expected_items": p.expected_items,
            "num_bits": p.num_bits,
            "job": "cards",
            "published_at": int(time.time() * 1000),
        }
    )


def test_a_published_filter_is_followed_and_applied(kafka_stack: StackConfig) -> None:
    topic = f"test.compromised-{uuid.uuid4().hex[:8]}"  # this test's own topic
    ensure_topics(kafka_stack, [topic])
    producer = Producer(producer_config(kafka_stack))
    producer.produce(topic, record("term-before", T0, [CARD]), key=b"term-before")
    producer.produce(topic, b"{not json", key=b"bad")
    assert producer.flush(30) == 0
    store = CompromisedCards(CompromisedCardParams())
    updater = CompromisedUpdater(kafka_stack, topic, store)
    updater.start()
    try:
        assert updater.rebuilt.wait(60), updater.last_error
        assert len(store) == 1 and updater.malformed == 1
        producer.produce(topic, record("term-after", T0 + 60_000, [CARD]), key=b"term-after")
        assert producer.flush(30) == 0
        deadline = time.monotonic() + 60
        while len(store) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(store) == 2, "the filter published after start never arrived"
    finally:
        updater.stop()
    alert = store.check(CARD, "tx-1", T0 + 120_000, "online", "dv-thief")
    assert alert is not None and alert.evidence["filters_holding"] == 2
    assert store.check("tok_" + "0a" * 16, "tx-2", T0 + 120_000, "online", "dv-thief") is None
