"""CardRules: the per-card state behind card-velocity's transformWithStateInPandas operator."""

from __future__ import annotations

import pandas as pd
import pytest

from detectors import SpendingParams, TravelParams, travel_alerts
from pipeline.jobs.card_velocity.state import CardRules

PARIS = (48.8566, 2.3522)
NEW_YORK = (40.7128, -74.0060)
LONDON = (51.5074, -0.1278)
MINUTE = 60_000


def rules(spending: bool = False) -> CardRules:
    return CardRules("card-1", TravelParams(), SpendingParams() if spending else None)


def use(r: CardRules, event_id: str, minute: float, where: tuple[float, float] | None) -> bool:
    lat, lon = where if where else (None, None)
    return r.push(event_id, int(minute * MINUTE), lat, lon, where is not None, 20.0, "food")


def keys(alerts: list) -> list[tuple[str, tuple[str, ...]]]:
    return [(a.rule, a.event_ids) for a in alerts]


def test_nothing_is_judged_before_the_watermark_passes() -> None:
    r = rules()
    use(r, "paris", 0, PARIS)
    use(r, "ny", 30, NEW_YORK)
    assert r.release(29 * MINUTE) == []
    assert r.buffered == 1
    assert keys(r.release(30 * MINUTE)) == [("impossible_travel", ("paris", "ny"))]
    assert r.buffered == 0


@pytest.mark.parametrize("order", [["paris", "ny"], ["ny", "paris"]])
def test_arrival_order_does_not_matter(order: list[str]) -> None:
    r = rules()
    at = {"paris": (0, PARIS), "ny": (30, NEW_YORK)}
    for event_id in order:
        use(r, event_id, *at[event_id])
    alerts = r.release(60 * MINUTE)
    assert keys(alerts) == [("impossible_travel", ("paris", "ny"))]


def test_a_late_middle_use_is_judged_in_event_time_order_like_the_batch_form() -> None:
    """Paris, then London 4 h later, then NY 20 min after London; London arrives last.

    In event-time order the pairs are Paris-London (possible) and London-NY (impossible):
    arrival order would have compared Paris with NY instead (also impossible, other ids)."""
    r = rules()
    use(r, "paris", 0, PARIS)
    use(r, "ny", 260, NEW_YORK)
    use(r, "london", 240, LONDON)
    alerts = r.release(300 * MINUTE)
    assert keys(alerts) == [("impossible_travel", ("london", "ny"))]
    frame = pd.DataFrame(
        {
            "entity_id": "card-1",
            "event_id": ["paris", "ny", "london"],
            "event_time": [0, 260 * MINUTE, 240 * MINUTE],
            "lat": [PARIS[0], NEW_YORK[0], LONDON[0]],
            "lon": [PARIS[1], NEW_YORK[1], LONDON[1]],
        }
    )
    assert [a.alert_id for a in alerts] == travel_alerts(frame)["alert_id"].tolist()


def test_duplicates_and_online_uses_raise_nothing_more() -> None:
    r = rules()
    use(r, "paris", 0, PARIS)
    use(r, "paris", 0, PARIS)
    use(r, "web", 10, None)
    use(r, "ny", 30, NEW_YORK)
    use(r, "ny", 30, NEW_YORK)
    assert keys(r.release(60 * MINUTE)) == [("impossible_travel", ("paris", "ny"))]


def test_a_use_behind_what_was_released_is_refused() -> None:
    r = rules()
    use(r, "a", 10, PARIS)
    r.release(10 * MINUTE)
    assert not use(r, "b", 5, PARIS)
    assert r.buffered == 0


def test_spending_profile_is_built_in_event_time_order() -> None:
    r = rules(spending=True)
    r.push("big", 20 * MINUTE, None, None, False, 900.0, "electronics")  # arrives first
    for i in range(10):
        r.push(f"g{i}", i * MINUTE, *PARIS, True, 20.0, "grocery")
    alerts = r.release(30 * MINUTE)
    assert keys(alerts) == [("spending_anomaly", ("big",))]
    assert alerts[0].evidence["median_amount"] == 20.0


def test_snapshot_round_trip_keeps_buffer_states_and_timer() -> None:
    r = rules(spending=True)
    use(r, "paris", 0, PARIS)
    r.release(0)
    use(r, "ny", 30, NEW_YORK)
    r.timer_ms = r.next_timer(None)
    restored = rules(spending=True)
    restored.load_json(r.to_json())
    assert (restored.buffered, restored.timer_ms, restored.latest_ms) == (
        1,
        30 * MINUTE,
        30 * MINUTE,
    )
    assert keys(restored.release(30 * MINUTE)) == [("impossible_travel", ("paris", "ny"))]


def test_next_timer_and_expiry() -> None:
    r = rules()
    assert r.next_timer(MINUTE) is None  # nothing seen yet
    use(r, "b", 2, PARIS)
    use(r, "a", 1, PARIS)
    assert r.next_timer(MINUTE) == 1 * MINUTE
    r.release(1 * MINUTE)
    assert r.next_timer(MINUTE) == 2 * MINUTE
    r.release(2 * MINUTE)
    assert r.next_timer(MINUTE) == 3 * MINUTE  # latest use + ttl
    assert not r.expired(3 * MINUTE - 1, MINUTE)
    assert r.expired(3 * MINUTE, MINUTE)
    assert not r.expired(10 * MINUTE, None)


def test_a_disabled_rule_keeps_no_state() -> None:
    r = CardRules("card-1", None, None)
    use(r, "paris", 0, PARIS)
    use(r, "ny", 30, NEW_YORK)
    assert r.release(60 * MINUTE) == []
    assert '"travel":null' in r.to_json()
