"""Spending anomaly (account takeover) and compromised terminal."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from detectors import (
    SpendingFeatures,
    SpendingParams,
    SpendingState,
    TerminalParams,
    check_spending,
    check_terminal_window,
    spending_alerts,
    spending_feature_alerts,
    spending_features,
    terminal_window_alerts,
    terminal_window_features,
)

P = SpendingParams(amount_multiple=5, max_category_share=0.05, min_history=10, min_amount=200)


def history(amounts: list[float], categories: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "entity_id": "card-1",
            "event_id": [f"t{i:03}" for i in range(len(amounts))],
            "event_time": [i * 3_600_000 for i in range(len(amounts))],
            "amount": amounts,
            "category": categories,
        }
    )


def run_state(rows: pd.DataFrame, state: SpendingState) -> list[str]:
    out = []
    for r in rows.itertuples(index=False):
        out += [a.alert_id for a in state.update(r.event_id, r.event_time, r.amount, r.category)]
    return out


def test_large_amount_in_new_category_fires_with_evidence() -> None:
    rows = history([20.0, 30.0, 25.0] * 4 + [900.0], ["grocery"] * 12 + ["jewelry"])
    alerts = spending_alerts(rows, P)
    assert alerts["event_ids"].tolist() == [["t012"]]
    assert alerts["label"].tolist() == ["account_takeover"]
    evidence = json.loads(alerts["evidence"].iat[0])
    assert evidence["median_amount"] == 25.0 and evidence["category_share"] == 0.0
    assert evidence["amount_multiple"] == 5


def test_hard_negatives_usual_category_small_history_or_small_amount() -> None:
    usual = history([100.0] * 12 + [900.0], ["travel"] * 13)  # big, but the usual category
    assert spending_alerts(usual, P).empty
    young = history([20.0] * 9 + [900.0], ["grocery"] * 9 + ["jewelry"])  # 9 < min_history
    assert spending_alerts(young, P).empty
    cheap = history([10.0] * 12 + [199.0], ["grocery"] * 12 + ["jewelry"])  # under min_amount
    assert spending_alerts(cheap, P).empty


def test_boundaries_are_strict() -> None:
    f = SpendingFeatures(history_count=20, median_amount=50.0, category_count=0)
    assert check_spending("c", "e", 0, 250.0, "x", f, P) is None  # not above 5 x median
    assert check_spending("c", "e", 0, 250.01, "x", f, P) is not None
    seen_once = SpendingFeatures(history_count=20, median_amount=50.0, category_count=1)
    assert check_spending("c", "e", 0, 900.0, "x", seen_once, P) is None  # share 0.05
    at_history = SpendingFeatures(history_count=10, median_amount=50.0, category_count=0)
    assert check_spending("c", "e", 0, 900.0, "x", at_history, P) is not None


def test_stateful_matches_vectorised_and_ignores_duplicates() -> None:
    rng = np.random.default_rng(9)
    total = 0
    for _ in range(5):
        n = 200
        amounts = np.round(rng.lognormal(3, 0.6, n), 2)
        spikes = rng.random(n) < 0.05
        amounts[spikes] *= 30
        cats = rng.choice(["grocery", "fuel", "dining"], n, p=[0.6, 0.3, 0.1]).astype(object)
        cats[spikes] = rng.choice(["jewelry", "electronics", "gift_cards"], spikes.sum())
        rows = history(list(amounts), list(cats))
        want = spending_alerts(rows, P)
        total += len(want)
        state = SpendingState("card-1", P)
        dups = pd.concat([rows, rows]).sort_values(["event_time"], kind="stable")
        assert run_state(dups, state) == want["alert_id"].tolist()
    assert total > 10


def test_features_from_elsewhere_and_check_without_update() -> None:
    rows = history([20.0] * 12 + [900.0], ["grocery"] * 12 + ["jewelry"])
    features = spending_features(rows, P)
    assert features["history_count"].tolist()[-1] == 12
    assert features["category_count"].tolist()[-2:] == [11, 0]
    assert len(spending_feature_alerts(features, P)) == 1
    state = SpendingState("card-1", P)
    for r in rows.iloc[:12].itertuples(index=False):
        state.add(r.event_id, r.event_time, r.amount, r.category)
    probe = state.check("t012", 0, 900.0, "jewelry")
    assert probe is not None and state.profile.count == 12
    restored = SpendingState("card-1", P)
    restored.restore(json.loads(json.dumps(state.snapshot())))
    assert restored.check("t012", 0, 900.0, "jewelry") == probe


# --- compromised terminal ------------------------------------------------------------------


def test_terminal_fires_on_distinct_cards_at_threshold() -> None:
    p = TerminalParams(window_s=600, min_distinct_cards=5)
    tx = pd.DataFrame(
        {
            "merchant_id": "m-7",
            "event_id": [f"e{i}" for i in range(9)],
            "event_time": [i * 1_000 for i in range(8)] + [700_000],
            "card_id": ["c1", "c2", "c3", "c4", "c1", "c2", "c3", "c4", "c5"],
        }
    )
    columns = {"entity_id": "merchant_id"}
    features = terminal_window_features(tx, p, columns)
    assert features[["distinct_cards", "tx_count"]].values.tolist() == [[4, 8], [1, 1]]
    assert terminal_window_alerts(features, p).empty  # 8 uses but only 4 cards
    tx.loc[8, "event_time"] = 9_000
    features = terminal_window_features(tx, p, columns)
    alerts = terminal_window_alerts(features, p)
    assert alerts["entity_id"].tolist() == ["m-7"]
    assert alerts["rule"].tolist() == ["compromised_terminal"]
    assert json.loads(alerts["evidence"].iat[0])["distinct_cards"] == 5


def test_terminal_scalar_form_and_stable_id() -> None:
    p = TerminalParams(min_distinct_cards=20)
    assert check_terminal_window("m", 0, 600_000, 19, p) is None
    a = check_terminal_window("m", 0, 600_000, 20, p, tx_count=40)
    b = check_terminal_window("m", 0, 600_000, 31, p, tx_count=70)
    assert a is not None and b is not None and a.alert_id == b.alert_id  # same window


def test_terminal_sliding_windows_alert_once_on_a_burst_across_a_boundary() -> None:
    p = TerminalParams(window_s=600, min_distinct_cards=5)
    start = 600_000 - 120_000  # six cards 40 s apart: three each side of the 10-minute mark
    tx = pd.DataFrame(
        {
            "entity_id": "m-7",
            "event_id": [f"e{i}" for i in range(6)],
            "event_time": [start + 40_000 * i for i in range(6)],
            "card_id": [f"c{i}" for i in range(6)],
        }
    )
    assert terminal_window_alerts(terminal_window_features(tx, p), p).empty
    features = terminal_window_features(tx, p, slide_ms=60_000)
    assert (features["distinct_cards"] >= 5).sum() > 1
    alerts = terminal_window_alerts(features, p)
    assert len(alerts) == 1
    assert json.loads(alerts["evidence"].iat[0])["distinct_cards"] >= 5
