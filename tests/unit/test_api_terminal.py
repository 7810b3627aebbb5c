"""The compromised-terminal rule at the fraud endpoint (real app, TestClient, fake clock)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from api.fraud.settings import ApiSettings, StateSettings
from api.fraud.updater import ActivityUpdater
from core.config import StackConfig
from core.pan import make_pans
from detectors import TerminalParams
from tests.unit.test_api_decisions import MIN, T0, Harness, tx

PANS = make_pans(np.random.default_rng(12), 60, ["4"])
RULE = "compromised_terminal"


def burst(prefix: str, cards: list[str], merchant: str, start: int, gap_ms: int) -> list[dict]:
    """One use per card at `merchant`, `gap_ms` apart."""
    return [
        tx(f"{prefix}{i}", start + i * gap_ms, card_number=pan, merchant_id=merchant)
        for i, pan in enumerate(cards)
    ]


def flagged(h: Harness, bodies: list[dict]) -> list[str]:
    """The transactions whose verdict names the rule."""
    return [b["transaction_id"] for b in bodies if RULE in h.post(b)["reasons"]]


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness()
    with harness.client:
        yield harness


def test_a_burst_of_cards_at_one_merchant_is_flagged_once_at_the_crossing(h: Harness) -> None:
    bodies = burst("s", PANS[:30], "m-skim", T0, 10_000)  # 30 cards in 5 minutes
    assert flagged(h, bodies) == ["s9"]  # the 10th distinct card, and only it
    records = [r for r in h.records() if RULE in r["reasons"]]
    assert len(records) == 1
    verdict = records[0]
    assert verdict["decision"] == "review"  # the card paying there is a victim, not a thief
    (alert,) = verdict["evidence"]["alerts"]
    assert alert["label"] == RULE
    assert sorted(alert["event_ids"]) == sorted(f"s{i}" for i in range(10))


def test_a_busy_merchant_below_the_threshold_is_not_flagged(h: Harness) -> None:
    """300 uses in 10 minutes, by 9 cards: busy, but never 10 cards."""
    cards = [PANS[i % 9] for i in range(300)]
    assert flagged(h, burst("b", cards, "m-busy", T0, 2_000)) == []


def test_the_burst_state_is_rebuilt_from_the_topic() -> None:
    """Uses before a restart count after it, and a burst that alerted does not alert again."""
    before = Harness()
    with before.client:
        first = burst("s", PANS[:6], "m-skim", T0, 10_000)
        done = burst("d", PANS[30:55], "m-done", T0, 5_000)
        assert flagged(before, first) == [] and flagged(before, done) == ["d9"]
    after = Harness()
    updater = ActivityUpdater(StackConfig(), "cards.activity", after.service.state)
    for _, value in before.publisher.records:
        updater._apply(value, 0, 0)
    with after.client:
        rest = burst("s", PANS[:25], "m-skim", T0, 10_000)[6:]
        assert flagged(after, rest) == ["s9"]
        more = [tx("d25", T0 + 130_000, card_number=PANS[55], merchant_id="m-done")]
        assert flagged(after, more) == []  # the same burst


def test_merchants_idle_for_a_window_are_dropped_and_the_count_is_capped() -> None:
    settings = ApiSettings(gc_freeze_interval_s=None, state=StateSettings(max_merchants=50))
    h = Harness(settings)
    with h.client:
        for i in range(40):  # one merchant a minute: each idle 10 minutes later
            h.post(tx(f"m{i}", T0 + i * MIN, card_number=PANS[i], merchant_id=f"m-{i}"))
        assert sorted(h.service.state.merchants) == sorted(f"m-{i}" for i in range(30, 40))
        for i in range(80):  # 80 merchants in one second: capped at 50
            h.post(tx(f"n{i}", T0 + 40 * MIN, card_number=PANS[i % 60], merchant_id=f"n-{i}"))
        assert len(h.service.state.merchants) == 50
        assert "n-79" in h.service.state.merchants and "n-0" not in h.service.state.merchants


def test_terminal_key_counts_cards_per_terminal_and_the_rule_can_be_off() -> None:
    tills = [
        {**b, "terminal_id": f"till-{i % 4}"}
        for i, b in enumerate(burst("s", PANS[:30], "m-super", T0, 10_000))
    ]
    per_terminal = ApiSettings(gc_freeze_interval_s=None)  # the default
    per_merchant = ApiSettings(gc_freeze_interval_s=None, terminal_key="merchant")
    off = ApiSettings(gc_freeze_interval_s=None, terminal=None)
    low = ApiSettings(gc_freeze_interval_s=None, terminal=TerminalParams(min_distinct_cards=5))
    for settings, want in ((per_terminal, []), (per_merchant, ["s9"]), (off, [])):
        h = Harness(settings)
        with h.client:
            assert flagged(h, tills) == want
    h = Harness(low)
    with h.client:
        assert flagged(h, tills) == ["s16", "s17", "s18", "s19"]  # each till's fifth card
