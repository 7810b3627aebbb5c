"""`TerminalState`: the compromised-terminal rule's per-use step form (the fraud endpoint's)."""

from __future__ import annotations

import json

import pandas as pd

from detectors import (
    TerminalParams,
    TerminalState,
    terminal_window_alerts,
    terminal_window_features,
)

P = TerminalParams(window_s=600, min_distinct_cards=5)
MIN = 60_000


def fired(state: TerminalState, uses: list[tuple[str, int, str]]) -> list[str]:
    """The event ids whose use raised an alert."""
    return [i for i, t, card in uses if state.update(i, t, card) is not None]


def test_fires_once_at_the_crossing_of_a_burst() -> None:
    state = TerminalState("m-7", P)
    uses = [(f"u{i}", i * 10_000, f"card-{i}") for i in range(12)]
    assert fired(state, uses) == ["u4"]  # the fifth distinct card, and never again
    alert = TerminalState("m-7", P)
    for i, t, card in uses[:4]:
        alert.add(i, t, card)
    crossing = alert.check("u4", 40_000, "card-4")
    assert crossing is not None and alert.distinct_cards() == 4  # check leaves the state alone
    assert crossing.rule == crossing.label == "compromised_terminal"
    assert crossing.entity_id == "m-7"
    assert sorted(crossing.event_ids) == ["u0", "u1", "u2", "u3", "u4"]
    assert crossing.evidence["distinct_cards"] == 5 and crossing.evidence["tx_count"] == 5
    assert crossing.evidence["window_end"] - crossing.evidence["window_start"] == 600_000


def test_a_busy_merchant_below_the_threshold_never_fires() -> None:
    """Hundreds of uses in every window, but by four regular cards."""
    state = TerminalState("m-busy", P)
    uses = [(f"u{i}", i * 2_000, f"card-{i % 4}") for i in range(1_000)]
    assert fired(state, uses) == []
    assert state.distinct_cards() == 4


def test_cards_outside_the_window_are_evicted_and_do_not_count() -> None:
    """A new card every three minutes: never five in ten minutes, and only the window is kept."""
    state = TerminalState("m-slow", P)
    uses = [(f"u{i}", i * 3 * MIN, f"card-{i}") for i in range(200)]
    assert fired(state, uses) == []
    assert state.distinct_cards() == len(state) == len(state.ids) == 4  # 4 uses, not 200
    state.add("u0", 0, "card-0")  # a repeat of an evicted use is that late: ignored
    assert len(state) == 4


def test_the_ring_is_capped_and_a_late_use_beyond_the_window_is_ignored() -> None:
    state = TerminalState("m-cap", TerminalParams(min_distinct_cards=5), max_uses=8)
    for i in range(50):
        state.add(f"u{i}", i, f"card-{i % 3}")
    assert len(state) == 8
    state.add("late", 49 - 600_000, "card-9")  # at the window's open end: too late to count
    assert state.distinct_cards() == 3 and state.check("late2", -(10**9), "card-8") is None


def test_a_count_dipping_below_the_threshold_alerts_once_then_a_later_burst_again() -> None:
    state = TerminalState("m-7", P)
    burst = [(f"a{i}", i * 10_000, f"card-{i}") for i in range(5)]  # fires at a4 (40 s)
    # The window dips to 3 cards at 625 s and is back at 5 at 634 s: one burst, not two.
    dip = [(f"d{i}", t, f"card-{i}") for i, t in enumerate((625_000, 630_000, 632_000, 634_000))]
    counts = []
    for i, t, card in burst + dip:
        assert i == "a4" or state.check(i, t, card) is None
        state.add(i, t, card)
        counts.append(state.distinct_cards())
    assert counts == [1, 2, 3, 4, 5, 3, 3, 4, 5]
    # A whole window after the burst last held 5 cards, a new crossing is a new burst.
    later = [(f"b{i}", 634_000 + 600_000 + i * 10_000, f"new-{i}") for i in range(5)]
    assert fired(state, later) == ["b4"]


def test_a_repeated_event_id_is_ignored_and_arrival_order_does_not_matter() -> None:
    uses = [(f"u{i}", i * 10_000, f"card-{i}") for i in range(6)]
    state = TerminalState("m-7", P)
    shuffled = [uses[i] for i in (3, 0, 5, 1, 1, 4, 2)]
    assert fired(state, shuffled) == ["u4"]  # the fifth distinct card to arrive
    assert state.distinct_cards() == 6 and len(state) == 6


def test_the_step_form_fires_where_the_window_form_does() -> None:
    """Same burst as the per-window test: sliding windows alert once, and so does the step."""
    start = 600_000 - 120_000
    uses = [(f"e{i}", start + 40_000 * i, f"c{i}") for i in range(6)]
    frame = pd.DataFrame(uses, columns=["event_id", "event_time", "card_id"]).assign(entity_id="m")
    windows = terminal_window_alerts(terminal_window_features(frame, P, slide_ms=60_000), P)
    assert len(windows) == 1
    assert fired(TerminalState("m", P), uses) == ["e4"]


def test_snapshot_round_trip_keeps_the_burst() -> None:
    state = TerminalState("m-7", P)
    fired(state, [(f"u{i}", i * 10_000, f"card-{i}") for i in range(6)])
    restored = TerminalState("m-7", P)
    restored.restore(json.loads(json.dumps(state.snapshot())))
    assert restored.distinct_cards() == 6
    assert restored.check("u6", 70_000, "card-6") is None  # still the same burst
    assert restored.check("u5", 50_000, "card-5") is None  # a known id
