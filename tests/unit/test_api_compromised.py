"""Compromised cards at the fraud endpoint: a card in a compromised terminal's Bloom filter is
sent to review on its next card-not-present purchases (real app, TestClient, fake clock)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from api.fraud.compromised import CompromisedCards
from api.fraud.settings import ApiSettings
from core.contracts.compromised import SCHEMA
from core.pan import make_pans
from detectors.cards.bloom import CompromisedCardParams, SparkBloomFilter
from tests.unit.test_api_decisions import MIN, T0, Harness, tx

PANS = make_pans(np.random.default_rng(35), 3, ["4"])
RULE = "compromised_card"
THIEF = {"device_id": "dv-thief"}  # a device no profile lists
WINDOW_END = T0 + 10 * MIN


def record(tokens: list[str], terminal: str = "term-9") -> dict:
    """A `cards.compromised-cards/1` record as the cards job writes it (base64 with MIME line
    breaks, as Spark's `base64` chunks it)."""
    p = CompromisedCardParams()
    bloom = SparkBloomFilter.create(p.expected_items, p.fpp)
    for token in tokens:
        bloom.put_token(token)
    text = bloom.to_base64()
    return {
        "schema": SCHEMA,
        "terminal_id": terminal,
        "window_start": T0,
        "window_end": WINDOW_END,
        "distinct_cards": len(tokens),
        "tx_count": len(tokens),
        "first_crossing": True,
        "filter": "\r\n".join(text[i : i + 76] for i in range(0, len(text), 76)),
        "item": "token_key",
        "fpp": p.fpp,
        "expected_items": p.expected_items,
        "num_bits": p.num_bits,
        "job": "cards",
        "published_at": WINDOW_END + MIN,
    }


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness()
    token = harness.service.tokenizer.token
    assert harness.service.compromised is not None
    harness.service.compromised.put(record([token(PANS[0]), token(PANS[1])]))
    with harness.client:
        yield harness


def test_a_skimmed_cards_next_online_purchase_goes_to_review(h: Harness) -> None:
    verdict = h.post(tx("cnp-1", WINDOW_END + 30 * MIN, None, card_number=PANS[0], **THIEF))
    assert verdict["decision"] == "review"
    assert RULE in verdict["reasons"]
    (alert,) = verdict["evidence"]["alerts"]
    assert alert["label"] == "compromised_terminal" and alert["event_ids"] == ["cnp-1"]
    again = h.post(tx("cnp-2", WINDOW_END + 40 * MIN, None, card_number=PANS[1], **THIEF))
    assert again["decision"] == "review"


def test_only_card_not_present_purchases_of_listed_cards_after_the_window(h: Harness) -> None:
    in_store = h.post(tx("cp-1", WINDOW_END + MIN, card_number=PANS[0]))
    assert in_store["decision"] == "approve" and RULE not in in_store["reasons"]
    before = h.post(tx("early", WINDOW_END - MIN, None, card_number=PANS[1], **THIEF))
    assert RULE not in before["reasons"]  # during the window: not yet known compromised
    other = h.post(tx("other", WINDOW_END + MIN, None, card_number=PANS[2], **THIEF))
    assert other["decision"] == "approve" and RULE not in other["reasons"]
    day = round(CompromisedCardParams().apply_s * 1000)
    late = h.post(tx("late", WINDOW_END + day + MIN, None, card_number=PANS[1], **THIEF))
    assert RULE not in late["reasons"]  # the filter no longer applies
    assert h.service.compromised is not None and len(h.service.compromised) == 0


def test_a_record_that_is_not_a_filter_is_refused() -> None:
    cards = CompromisedCards(CompromisedCardParams())
    with pytest.raises(ValueError):
        cards.put({**record([]), "schema": "cards.profile/1"})
    with pytest.raises(ValueError):
        cards.put({**record([]), "filter": "AAAA"})
    assert len(cards) == 0


@pytest.mark.parametrize("gate", ["new", "any"])
def test_the_device_gate_spares_the_holders_own_device(gate: str) -> None:
    gated = CompromisedCardParams(devices=gate)
    harness = Harness(ApiSettings(gc_freeze_interval_s=None, compromised_cards=gated))
    token = harness.service.tokenizer.token(PANS[0])
    assert harness.service.compromised is not None
    harness.service.compromised.put(record([token]))
    harness.service.profiles.put(
        {"schema": "cards.profile/1", "card_token": token, "typical_amount": 25.0,
         "history_count": 40, "category_counts": {"grocery": 40}, "devices": ["dv-own"]}
    )  # fmt: skip
    with harness.client:
        own = harness.post(
            tx("own", WINDOW_END + MIN, None, card_number=PANS[0], device_id="dv-own")
        )
        assert (RULE in own["reasons"]) is (gate == "any")
        thief = harness.post(
            tx("thief", WINDOW_END + MIN, None, card_number=PANS[0], device_id="dv-x")
        )
        assert RULE in thief["reasons"] and thief["decision"] == "review"
