"""Velocity (card testing): per-event stateful, per-event vectorised and per-window forms."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from detectors import (
    VelocityFeatures,
    VelocityParams,
    VelocityState,
    check_velocity,
    check_velocity_window,
    velocity_alerts,
    velocity_window_alerts,
    velocity_window_features,
)

MIN = 60_000
P = VelocityParams(window_s=600, min_count=5, small_amount=5.0, min_small_count=3)


def tx(times: list[int], amounts: list[float], merchants: list[str] | None = None) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "entity_id": "card-1",
            "event_id": [f"t{i:03}" for i in range(len(times))],
            "event_time": times,
            "amount": amounts,
        }
    )
    if merchants is not None:
        frame["merchant_id"] = merchants
    return frame


def run_state(rows: pd.DataFrame, state: VelocityState) -> list[str]:
    fired = []
    for r in rows.itertuples(index=False):
        merchant = getattr(r, "merchant_id", None)
        fired += [a.alert_id for a in state.update(r.event_id, r.event_time, r.amount, merchant)]
    return fired


def test_card_testing_burst_fires_at_the_threshold_count() -> None:
    rows = tx([i * MIN for i in range(7)], [1.0] * 7)
    alerts = velocity_alerts(rows, P)
    assert alerts["event_time"].tolist() == [4 * MIN, 5 * MIN, 6 * MIN]  # 5th, 6th, 7th
    first = alerts.iloc[0]
    assert first["rule"] == "velocity" and first["label"] == "card_testing"
    assert first["event_ids"] == [f"t{i:03}" for i in range(5)]
    evidence = json.loads(first["evidence"])
    assert evidence["tx_count"] == 5 and evidence["small_count"] == 5
    assert evidence["min_count"] == 5 and evidence["amount_sum"] == 5.0


def test_window_edge_is_exclusive_on_the_left() -> None:
    # 5 transactions; the last is exactly window_s after the first: only 4 in its window.
    rows = tx([0, MIN, 2 * MIN, 3 * MIN, 10 * MIN], [1.0] * 5)
    assert velocity_alerts(rows, P).empty
    rows.loc[4, "event_time"] = 10 * MIN - 1
    assert len(velocity_alerts(rows, P)) == 1


def test_small_amount_threshold_is_strict() -> None:
    rows = tx([i * MIN for i in range(5)], [5.0, 5.0, 5.0, 4.99, 4.99])
    assert velocity_alerts(rows, P).empty  # only 2 below 5.0
    rows.loc[0, "amount"] = 4.99
    assert len(velocity_alerts(rows, P)) == 1


def test_many_normal_purchases_are_not_card_testing() -> None:
    rows = tx([i * MIN for i in range(8)], [42.0, 18.5, 60.0, 12.0, 7.5, 99.0, 30.0, 15.0])
    assert velocity_alerts(rows, P).empty
    state = VelocityState("card-1", P)
    assert run_state(rows, state) == []


def test_distinct_merchants_threshold() -> None:
    p = VelocityParams(min_count=5, min_small_count=3, min_distinct_merchants=3)
    rows = tx([i * MIN for i in range(5)], [1.0] * 5, ["m1", "m1", "m2", "m2", "m1"])
    assert velocity_alerts(rows, p).empty
    rows.loc[4, "merchant_id"] = "m3"
    assert len(velocity_alerts(rows, p)) == 1
    assert len(run_state(rows, VelocityState("card-1", p))) == 1


def test_duplicates_count_once() -> None:
    rows = tx([i * MIN for i in range(4)], [1.0] * 4)
    doubled = pd.concat([rows, rows])
    assert velocity_alerts(doubled, P).empty
    assert run_state(doubled, VelocityState("card-1", P)) == []


def test_late_event_completes_earlier_windows() -> None:
    rows = tx([i * MIN for i in range(6)], [1.0] * 6)
    order = [0, 1, 2, 4, 5, 3]  # t003 arrives last
    state = VelocityState("card-1", P)
    fired: list[list[int]] = []
    for i in order:
        r = rows.iloc[i]
        fired.append([a.event_time for a in state.update(r.event_id, r.event_time, r.amount)])
    # t005's window already holds 5; t003 arriving last completes t004's window (t000-t004)
    # and it fires then, with the same id the vectorised form gives it.
    assert fired == [[], [], [], [], [5 * MIN], [4 * MIN]]
    assert state.update("t003", 3 * MIN, 1.0) == []
    assert set(velocity_alerts(rows, P)["event_time"]) == {4 * MIN, 5 * MIN}


def test_check_matches_update_and_leaves_state_alone() -> None:
    state = VelocityState("card-1", P)
    for i in range(4):
        state.add(f"t{i}", i * MIN, 1.0)
    probe = state.check("t4", 4 * MIN, 1.0)
    assert probe is not None and state.check("t4", 4 * MIN, 1.0) == probe
    assert len(state.tx) == 4
    assert state.update("t4", 4 * MIN, 1.0) == [probe]


def test_state_keeps_only_the_retention_and_still_knows_stored_duplicates() -> None:
    state = VelocityState("card-1", P, max_seen=1)  # retention: three 10-minute windows
    run_state(tx([i * MIN for i in range(60)], [1.0] * 60), state)
    assert [t for t, *_ in state.tx] == [i * MIN for i in range(30, 60)]
    assert state.update("t050", 50 * MIN, 1.0) == []  # forgotten by `seen`, but stored


def test_state_is_bounded_and_restorable() -> None:
    state = VelocityState("card-1", P, max_events=8)
    run_state(tx([i * MIN for i in range(20)], [1.0] * 20), state)
    assert len(state.tx) == 8
    again = VelocityState("card-1", P, max_events=8)
    again.load_json(state.to_json())
    assert again.tx == state.tx and again.times == [t for t, *_ in state.tx]
    assert again.update("t020", 20 * MIN, 1.0) == state.update("t020", 20 * MIN, 1.0)


def _random_tx(rng: np.random.Generator, n: int) -> pd.DataFrame:
    gaps = np.where(rng.random(n) < 0.3, rng.integers(1, 3 * MIN, n), rng.integers(1, 90 * MIN, n))
    return tx(
        list(np.cumsum(gaps)),
        list(
            np.round(
                np.where(rng.random(n) < 0.5, rng.uniform(0.5, 6, n), rng.uniform(5, 200, n)), 2
            )
        ),
        list(rng.choice(["m1", "m2", "m3", None], n)),
    )


def test_stateful_and_vectorised_agree_on_shuffled_duplicated_input() -> None:
    rng = np.random.default_rng(5)
    p = VelocityParams(min_count=4, min_small_count=2, min_distinct_merchants=2)
    total = 0
    for seed in range(6):
        rows = _random_tx(rng, 150)
        want = velocity_alerts(rows, p)
        total += len(want)
        noisy = pd.concat([rows, rows.sample(30, random_state=seed)]).sample(
            frac=1, random_state=seed
        )
        state = VelocityState("card-1", p, max_events=1000, retention_s=10**7)
        got = run_state(noisy, state)
        assert sorted(got) == sorted(want["alert_id"])
    assert total > 20


def test_window_features_and_window_rule() -> None:
    rows = tx(
        [0, 1, 2, 3, 4, 11 * MIN], [1.0, 1.0, 1.0, 50.0, 2.0, 1.0], ["a", "b", "a", "a", "a", "a"]
    )
    features = velocity_window_features(rows, P)
    assert features[
        ["window_start", "tx_count", "small_count", "distinct_merchants"]
    ].values.tolist() == [
        [0, 5, 4, 2],
        [600_000, 1, 1, 1],
    ]
    alerts = velocity_window_alerts(features, P)
    assert len(alerts) == 1 and alerts.iloc[0]["event_time"] == 4
    assert alerts.iloc[0]["event_ids"] == [f"t{i:03}" for i in range(5)]
    again = velocity_window_alerts(features, P)
    assert again["alert_id"].tolist() == alerts["alert_id"].tolist()


def test_window_rule_accepts_spark_timestamps_and_minimal_columns() -> None:
    windows = pd.DataFrame(
        {
            "card": ["c1", "c2"],
            "window_start": pd.to_datetime([0, 0], unit="ms"),
            "window_end": pd.to_datetime([600_000, 600_000], unit="ms"),
            "tx_count": [5, 4],
            "small_count": [3, 4],
        }
    )
    alerts = velocity_window_alerts(windows, P, columns={"entity_id": "card"})
    assert alerts["entity_id"].tolist() == ["c1"]
    assert alerts["event_time"].tolist() == [599_999]
    with pytest.raises(ValueError, match="distinct_merchants"):
        velocity_window_alerts(
            windows, VelocityParams(min_distinct_merchants=2), columns={"entity_id": "card"}
        )


def test_scalar_window_and_event_checks_share_the_predicate() -> None:
    at = VelocityFeatures(tx_count=5, small_count=3, amount_sum=9.0, distinct_merchants=1)
    below = VelocityFeatures(tx_count=5, small_count=2)
    assert check_velocity("c", "t5", 10, at, P) is not None
    assert check_velocity("c", "t5", 10, below, P) is None
    w = check_velocity_window("c", 0, 600_000, at, P)
    assert w is not None and w.evidence["window_end"] == 600_000
    assert w.alert_id != check_velocity("c", "t5", 10, at, P).alert_id  # type: ignore[union-attr]


def test_sliding_windows_catch_a_burst_a_tumbling_boundary_splits() -> None:
    # Eight small amounts 40 s apart across the 10-minute boundary: four on each side.
    burst = tx([10 * MIN - 160_000 + 40_000 * i for i in range(8)], [1.0] * 8)
    tumbling = velocity_window_alerts(velocity_window_features(burst, P), P)
    assert tumbling.empty
    sliding = velocity_window_alerts(velocity_window_features(burst, P, slide_ms=MIN), P)
    assert len(sliding) == 1
    assert len(sliding.iloc[0]["event_ids"]) >= P.min_count


def test_sliding_windows_alert_once_per_burst_at_the_first_crossing() -> None:
    burst = tx([30_000 * i for i in range(10)], [1.0] * 10)  # 0 .. 4.5 minutes
    features = velocity_window_features(burst, P, slide_ms=MIN)
    firing = features[(features["tx_count"] >= 5) & (features["small_count"] >= 3)]
    assert len(firing) > 5  # every window sliding over the burst holds it
    alerts = velocity_window_alerts(features, P)
    assert len(alerts) == 1
    alert = alerts.iloc[0]
    # The window whose newest minute brought the fifth transaction (t004 at 2 minutes).
    assert json.loads(alert["evidence"])["window_end"] == 3 * MIN
    assert alert["event_ids"] == [f"t{i:03}" for i in range(6)]
    without_prior = features.drop(columns=[c for c in features if c.startswith("prior_")])
    assert len(velocity_window_alerts(without_prior, P)) == len(firing)


def test_sliding_features_without_their_last_slide() -> None:
    rows = tx([0, 30_000, 90_000], [1.0, 50.0, 1.0], ["a", "b", "a"])
    features = velocity_window_features(rows, P, slide_ms=MIN).set_index("window_end")
    window = features.loc[2 * MIN]  # [-8 min, 2 min): all three; before 1 min: the first two
    assert (window["tx_count"], window["small_count"], window["distinct_merchants"]) == (3, 2, 2)
    assert (window["prior_tx_count"], window["prior_small_count"]) == (2, 1)
    assert window["prior_distinct_merchants"] == 2
    assert features.loc[MIN, "prior_tx_count"] == 0


def test_window_alert_id_follows_the_window_and_its_first_event() -> None:
    f = VelocityFeatures(tx_count=6, small_count=6)
    first = check_velocity_window("card-1", 0, 600_000, f, P, ["run1-a", "run1-b"])
    grown = check_velocity_window("card-1", 0, 600_000, f, P, ["run1-a", "run1-b", "run1-c"])
    rerun = check_velocity_window("card-1", 0, 600_000, f, P, ["run2-a", "run2-b"])
    assert first is not None and grown is not None and rerun is not None
    assert first.alert_id == grown.alert_id  # an update-mode re-emission keeps its id
    assert first.alert_id != rerun.alert_id  # another run's events in the same window do not
