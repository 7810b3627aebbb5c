"""BucketState: the compact per-bucket state behind cards's one stateful operator.

Fed in arrival order and released by a rising watermark, it must raise exactly the alerts (ids
included) of the detectors' batch forms over the same transactions."""

from __future__ import annotations

import random
from dataclasses import replace

import pandas as pd
import pytest

from detectors import (
    SpendingParams,
    TerminalParams,
    TravelParams,
    VelocityParams,
    spending_alerts,
    terminal_window_alerts,
    terminal_window_features,
    travel_alerts,
    velocity_window_alerts,
    velocity_window_features,
)
from pipeline.jobs.cards.state import BucketState, CardRuleParams, _emit

PARIS = (48.8566, 2.3522)
NEW_YORK = (40.7128, -74.0060)
LYON = (45.7640, 4.8357)
MINUTE = 60_000
PARAMS = CardRuleParams(
    travel=TravelParams(),
    spending=SpendingParams(),
    velocity=VelocityParams(),
    terminal=TerminalParams(),
    slide_ms=MINUTE,
    ttl_ms=None,
)


def transactions(seed: int, n: int = 800) -> pd.DataFrame:
    """Cards at home in a few cities with bursts of small purchases, jumps abroad, big
    purchases and busy merchants; distinct event times per card."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        card = f"card-{rng.randrange(40)}"
        city = rng.choice([PARIS, LYON]) if rng.random() > 0.05 else NEW_YORK
        present = rng.random() > 0.2
        rows.append(
            {
                "event_id": f"e{i:05}",
                "card_token": card,
                "event_time": rng.randrange(0, 6 * 3_600_000),
                "amount": rng.choice([1.0, 2.0, 20.0, 35.0, 50.0, 900.0]),
                "merchant_id": f"m-{rng.randrange(12)}",
                "merchant_category": rng.choice(["food", "food", "retail", "jewelry"]),
                "lat": city[0] if present else None,
                "lon": city[1] if present else None,
                "card_present": present,
            }
        )
    return pd.DataFrame(rows)


def oracle(frame: pd.DataFrame) -> set[str]:
    cards = frame.rename(columns={"card_token": "entity_id"})
    merchants = frame.rename(columns={"card_token": "card_id", "merchant_id": "entity_id"})
    velocity = PARAMS.velocity
    terminal = PARAMS.terminal
    assert velocity is not None and terminal is not None
    alerts = pd.concat(
        [
            travel_alerts(cards, PARAMS.travel),
            velocity_window_alerts(
                velocity_window_features(cards, velocity, slide_ms=MINUTE), velocity
            ),
            terminal_window_alerts(
                terminal_window_features(merchants, terminal, slide_ms=MINUTE), terminal
            ),
            spending_alerts(
                cards.rename(columns={"merchant_category": "category"}), PARAMS.spending
            ),
        ]
    )
    return set(alerts["alert_id"])


def stream(frame: pd.DataFrame, batches: int, lateness_ms: int, seed: int) -> set[str]:
    """Feed `frame` in a disordered arrival order, one bucket, the watermark `lateness_ms`
    behind the latest event time seen (rows later than the watermark are dropped upstream by
    Spark: here none are, the disorder stays within the lateness); bytes round trip per
    batch."""
    rng = random.Random(seed)
    rows = frame.sort_values("event_time").to_dict("records")
    for i in range(len(rows) - 1):  # local disorder only
        if rng.random() < 0.3 and rows[i + 1]["event_time"] - rows[i]["event_time"] < lateness_ms:
            rows[i], rows[i + 1] = rows[i + 1], rows[i]
    data: bytes | None = None
    got: list[str] = []
    watermark = 0
    size = -(-len(rows) // batches)
    for b in range(batches + 2):
        bucket = BucketState.from_bytes(data, PARAMS)
        for row in rows[b * size : (b + 1) * size]:
            for kind, entity, other in (
                ("c", row["card_token"], row["merchant_id"]),
                ("m", row["merchant_id"], row["card_token"]),
            ):
                assert bucket.push(
                    kind,
                    entity,
                    row["event_id"],
                    row["event_time"],
                    row["lat"],
                    row["lon"],
                    row["card_present"],
                    row["amount"],
                    row["merchant_category"],
                    other,
                )
            watermark = max(watermark, row["event_time"] - lateness_ms)
        if b >= batches:
            watermark = 10**13  # the end: every window closes
        got += [a.alert_id for a in bucket.advance(watermark)]
        data = bucket.to_bytes()
    assert len(got) == len(set(got)), "an alert raised twice"
    return set(got)


@pytest.mark.parametrize("seed", [1, 2])
def test_alert_ids_match_the_batch_forms(seed: int) -> None:
    frame = transactions(seed)
    expected = oracle(frame)
    assert expected  # the data does raise alerts of several rules
    assert stream(frame, batches=20, lateness_ms=2 * MINUTE, seed=seed) == expected


def test_one_batch_or_many_gives_the_same_alerts() -> None:
    frame = transactions(7, 400)
    assert stream(frame, 1, MINUTE, 7) == stream(frame, 50, MINUTE, 7) == oracle(frame)


def test_nothing_is_judged_before_the_watermark_passes() -> None:
    bucket = BucketState(PARAMS)
    bucket.push("c", "c1", "paris", 0, *PARIS, True, 20.0, "food", "m1")
    bucket.push("c", "c1", "ny", 30 * MINUTE, *NEW_YORK, True, 20.0, "food", "m1")
    assert bucket.advance(29 * MINUTE) == []
    assert bucket.timer() == 30 * MINUTE
    assert [a.event_ids for a in bucket.advance(30 * MINUTE)] == [("paris", "ny")]


def test_a_use_behind_what_was_released_is_refused_and_counted() -> None:
    bucket = BucketState(PARAMS)
    bucket.push("c", "c1", "a", 10 * MINUTE, *PARIS, True, 20.0, "food", "m1")
    bucket.advance(10 * MINUTE)
    assert not bucket.push("c", "c1", "b", 5 * MINUTE, *PARIS, True, 20.0, "food", "m1")
    assert bucket.late_dropped == 1


def test_quiet_entities_are_forgotten_after_the_ttl() -> None:
    params = CardRuleParams(travel=TravelParams(), ttl_ms=60 * MINUTE)
    bucket = BucketState(params)
    bucket.push("c", "c1", "a", 0, *PARIS, True, 20.0, "food", "m1")
    bucket.advance(0)
    assert bucket.timer() is None  # nothing pending: no timer
    bucket.advance(59 * MINUTE)
    assert "c:c1" in BucketState.from_bytes(bucket.to_bytes(), params).entities
    bucket.advance(60 * MINUTE)
    assert not BucketState.from_bytes(bucket.to_bytes(), params).entities


def test_a_window_rule_waits_for_its_window_to_close() -> None:
    bucket = BucketState(replace(PARAMS, velocity=VelocityParams(min_count=5)))
    for i in range(5):
        bucket.push("c", "ct", f"ct-{i}", i * MINUTE + 1, None, None, False, 1.0, "web", f"w{i}")
    assert bucket.advance(4 * MINUTE + 1) == []  # the window ending at 5 min is still open
    assert bucket.timer() == 5 * MINUTE
    alerts = bucket.advance(5 * MINUTE)
    assert [(a.rule, len(a.event_ids)) for a in alerts] == [("velocity", 5)]


def test_a_call_releases_up_to_its_newest_use_less_the_delay() -> None:
    params = CardRuleParams(travel=TravelParams(), delay_ms=2 * MINUTE)
    bucket = BucketState(params)
    bucket.push("c", "c1", "paris", 0, *PARIS, True, 20.0, "food", "m1")
    bucket.push("c", "c1", "ny", 30 * MINUTE, *NEW_YORK, True, 20.0, "food", "m1")
    bucket.push("c", "c2", "later", 33 * MINUTE, *PARIS, True, 20.0, "food", "m1")
    point = bucket.release_point(watermark_ms=5 * MINUTE)  # Spark's, a batch behind
    assert point == 31 * MINUTE
    assert [a.event_ids for a in bucket.advance(point)] == [("paris", "ny")]
    # a use behind what was released is later than the delay allows: refused and counted
    assert not bucket.push("c", "c1", "lyon", 31 * MINUTE, *LYON, True, 20.0, "food", "m1")
    assert bucket.push("c", "c1", "lyon", 31 * MINUTE + 1, *LYON, True, 20.0, "food", "m1")
    assert bucket.late_dropped == 1


def test_without_a_delay_a_call_releases_up_to_sparks_watermark() -> None:
    bucket = BucketState(PARAMS)
    bucket.push("c", "c1", "ny", 30 * MINUTE, *NEW_YORK, True, 20.0, "food", "m1")
    assert bucket.release_point(watermark_ms=5 * MINUTE) == 5 * MINUTE


def test_refused_uses_leave_the_operator_as_a_count_row() -> None:
    frames = list(_emit([], refused=2))
    assert [f[["alert_id", "dropped"]].to_dict("records") for f in frames] == [
        [{"alert_id": None, "dropped": 2}]
    ]
    assert list(_emit([], refused=0)) == []
