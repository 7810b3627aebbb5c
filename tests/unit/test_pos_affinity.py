"""Card affinity in the POS sink: the consistent hash that sends each card to one endpoint
instance (`simulators.sinks.http.route`), the sink's routing with and without affinity, and
the scenario's wiring of `domain.endpoint.urls` / `affinity`."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from typing import Any

import httpx
import orjson
import pytest
from pydantic import ValidationError

from core.config import StackConfig
from scenarios.cards.config import CardsDomain
from scenarios.cards.scenario import CardsScenario, endpoint_urls
from scenarios.catalog import ScenarioConfig
from simulators import Engine
from simulators.sinks import MemorySink, Records, Topics
from simulators.sinks.http import HttpEventSink, route

URLS = [f"http://127.0.0.1:{8001 + i}/v1/transactions" for i in range(3)]
TOPICS = Topics("cards.transactions", "truth.cards")
TOKENS = [f"{i:032x}".encode() for i in range(3000)]


def test_a_token_always_goes_to_the_same_instance_whatever_the_order_of_the_list() -> None:
    two = URLS[:2]
    for token in TOKENS[:200]:
        assert route(token, two) == route(token, list(reversed(two))) == route(token.decode(), two)


def test_two_instances_share_the_cards_about_evenly() -> None:
    counts = Counter(route(t, URLS[:2]) for t in TOKENS)
    assert set(counts) == set(URLS[:2])
    assert all(0.45 < n / len(TOKENS) < 0.55 for n in counts.values()), counts


def test_adding_an_instance_moves_only_the_cards_it_takes() -> None:
    before = {t: route(t, URLS[:2]) for t in TOKENS}
    after = {t: route(t, URLS) for t in TOKENS}
    moved = [t for t in TOKENS if before[t] != after[t]]
    assert all(after[t] == URLS[2] for t in moved)  # none moves between the old two
    assert 0.28 < len(moved) / len(TOKENS) < 0.39  # about a third: its fair share


def test_removing_an_instance_moves_only_its_own_cards() -> None:
    before = {t: route(t, URLS) for t in TOKENS}
    after = {t: route(t, [URLS[0], URLS[2]]) for t in TOKENS}
    assert all(before[t] == after[t] for t in TOKENS if before[t] != URLS[1])


def posts(
    keys: list[bytes], affinity: Any, fail_first: bool = False
) -> tuple[dict[str, list[str]], HttpEventSink]:
    """Post one request per key through the sink to `URLS[:2]`; which host got which tx."""
    seen: dict[str, list[str]] = defaultdict(list)
    lock = threading.Lock()
    failed: set[str] = set()

    def handler(request: httpx.Request) -> httpx.Response:
        tx = orjson.loads(request.content)["transaction_id"]
        with lock:
            seen[str(request.url)].append(tx)
            if fail_first and tx not in failed:
                failed.add(tx)
                return httpx.Response(503)
        return httpx.Response(200, json={"decision": "approve"})

    sink = HttpEventSink(
        MemorySink(), URLS[:2], transport=httpx.MockTransport(handler), affinity=affinity
    )
    sink.open(TOPICS)
    bodies = [orjson.dumps({"transaction_id": f"t{i}"}) for i in range(len(keys))]
    sink.write(Records(keys, bodies, list(range(len(keys)))), Records())
    sink.close()
    return seen, sink


def test_with_affinity_every_request_of_a_card_reaches_its_instance() -> None:
    keys = [TOKENS[i % 40] for i in range(400)]  # 40 cards, 10 uses each
    seen, sink = posts(keys, "token")
    for url, txs in seen.items():
        for tx in txs:
            assert route(keys[int(tx[1:])], URLS[:2]) == url
    stats = sink.stats()
    assert stats["affinity"] == "token" and sum(stats["instances"].values()) == 400
    assert stats["instances"] == {url: len(txs) for url, txs in seen.items()}


def test_without_affinity_the_instances_take_turns() -> None:
    keys = [TOKENS[0]] * 100  # one card
    seen, sink = posts(keys, "none")
    assert {url: len(txs) for url, txs in seen.items()} == {URLS[0]: 50, URLS[1]: 50}
    assert sink.stats()["instances"] == {URLS[0]: 50, URLS[1]: 50}


def test_a_retry_goes_to_the_same_instance() -> None:
    keys = [TOKENS[i] for i in range(30)]
    seen, sink = posts(keys, "token", fail_first=True)
    for url, txs in seen.items():
        assert len(txs) == 2 * len(set(txs))  # each sent twice, both times here
        assert all(route(keys[int(tx[1:])], URLS[:2]) == url for tx in txs)
    assert sink.stats()["ok"] == 30 and sink.stats()["retried"] == 30


def test_url_and_urls_are_exclusive_and_urls_are_http() -> None:
    with pytest.raises(ValidationError, match="url or urls"):
        CardsDomain.model_validate({"endpoint": {"url": URLS[0], "urls": URLS[1:]}})
    with pytest.raises(ValidationError):
        CardsDomain.model_validate({"endpoint": {"urls": ["ftp://x/"]}})
    with pytest.raises(ValidationError):
        CardsDomain.model_validate({"endpoint": {"urls": []}})
    with pytest.raises(ValidationError):
        CardsDomain.model_validate({"endpoint": {"urls": URLS, "affinity": "bin"}})
    domain = CardsDomain.model_validate({"endpoint": {"urls": URLS[:2]}})
    assert endpoint_urls(domain, StackConfig()) == URLS[:2]
    assert endpoint_urls(CardsDomain(), StackConfig()) == ["http://127.0.0.1:8000/v1/transactions"]


def test_the_simulated_terminals_send_each_card_to_one_instance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STREAMSIM_PAN_SECRET", "unit-test-pan-secret-0123456789")
    hosts: dict[str, set[str]] = defaultdict(set)
    lock = threading.Lock()

    def handler(request: httpx.Request) -> httpx.Response:
        pan = orjson.loads(request.content)["card_number"]
        with lock:
            hosts[pan].add(str(request.url))
        return httpx.Response(200, json={"decision": "approve"})

    cfg = ScenarioConfig.model_validate(
        {
            "entities": 200,
            "duration_s": 3600,
            "tick_s": 30,
            "domain": {"type": "cards", "delivery": "http", "endpoint": {"urls": URLS[:2]}},
        }
    )
    engine = Engine(CardsScenario(cfg, StackConfig()), cfg, MemorySink(), speed="max")
    sink = engine.sink
    assert isinstance(sink, HttpEventSink) and sink.urls == URLS[:2]
    sink._transport = httpx.MockTransport(handler)  # no server in a unit test
    summary = engine.run()
    assert summary.events > 100 and summary.failed == 0
    assert all(len(urls) == 1 for urls in hosts.values())  # every card at one instance
    used = Counter(next(iter(urls)) for urls in hosts.values())
    assert set(used) == set(URLS[:2]) and min(used.values()) > len(hosts) // 4, used
