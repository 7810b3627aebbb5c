"""Impossible travel (cards), GPS jump (vehicles) and the geodesic they rest on."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from detectors import (
    GpsJumpState,
    Position,
    TravelParams,
    TravelState,
    check_travel,
    geodesic_km,
    geodesic_km_array,
    gps_jump_alerts,
    haversine_km,
    travel_alerts,
)
from detectors.cards.travel import fastest_s, is_impossible, pair_alert, pair_distance_km
from detectors.geo import HAVERSINE_HIGH, HAVERSINE_LOW, vincenty_km

LONDON = (51.5074, -0.1278)
NEW_YORK = (40.7128, -74.0060)
SYDNEY = (-33.8688, 151.2093)
STRASBOURG = (48.5734, 7.7521)
KEHL = (48.5729, 7.8155)
PARIS = (48.8566, 2.3522)
LYON = (45.7640, 4.8357)
MIN = 60_000
HOUR = 3_600_000
P = TravelParams()


def pos(event_id: str, t: int, place: tuple[float, float]) -> Position:
    return Position(event_id, t, *place)


# --- geodesic ---------------------------------------------------------------------------


def test_vectorised_geodesic_matches_geopy() -> None:
    rng = np.random.default_rng(7)
    n = 400
    lat1, lon1 = rng.uniform(-90, 90, n), rng.uniform(-180, 180, n)
    lat2, lon2 = rng.uniform(-90, 90, n), rng.uniform(-180, 180, n)
    lat2[:100] = np.clip(lat1[:100] + rng.normal(0, 0.01, 100), -90, 90)  # short lines
    lon2[:100] = lon1[:100] + rng.normal(0, 0.01, 100)
    lat2[100:120] = -lat1[100:120]  # nearly antipodal: Vincenty falls back to geopy
    lon2[100:120] = lon1[100:120] + 179.9
    got = geodesic_km_array(lat1, lon1, lat2, lon2)
    want = np.array([geodesic_km(*p) for p in zip(lat1, lon1, lat2, lon2, strict=True)])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-6)


def test_scalar_geodesic_is_geopy_s_bit_for_bit() -> None:
    from geopy.distance import geodesic

    rng = np.random.default_rng(11)
    n = 2000
    pairs = np.column_stack(
        [
            rng.uniform(-90, 90, n),
            rng.uniform(-180, 180, n),
            rng.uniform(-90, 90, n),
            rng.uniform(-180, 180, n),
        ]
    )
    pairs[:500, 2] = np.clip(pairs[:500, 0] + rng.normal(0, 0.05, 500), -90, 90)  # short
    pairs[:500, 3] = pairs[:500, 1] + rng.normal(0, 0.05, 500)  # some past +-180
    pairs[500:600, 2], pairs[500:600, 3] = -pairs[500:600, 0], pairs[500:600, 1] + 179.99
    cases: list[tuple[float, ...]] = [tuple(float(v) for v in p) for p in pairs]
    cases += [
        (0.0, 0.0, 0.0, 0.0),
        (-0.0, -0.0, 0.0, 0.0),
        (45.0, 7.0, 45.0, 7.0),
        (90.0, 0.0, -90.0, 0.0),
        (90.0, 10.0, 90.0, -170.0),
        (0.0, 179.9, 0.0, -179.9),
        (0.0, 0.0, 0.0, 180.0),
        (0.0, 0.0, 0.5, 179.7),  # nearly antipodal
        (10.0, 190.0, 10.0, -350.0),  # longitudes geopy wraps
        (51, 0, 52, 1),  # ints
        (np.float64(51.5), np.float32(-0.25), np.float64(40.7), np.float64(-74.0)),
    ]
    for lat1, lon1, lat2, lon2 in cases:
        want = float(geodesic((lat1, lon1), (lat2, lon2)).km)
        got = geodesic_km(lat1, lon1, lat2, lon2)
        assert got == want and math.copysign(1, got) == math.copysign(1, want), (lat1, lon1)
    for bad in [(math.nan, 0.0, 0.0, 0.0), (0.0, math.inf, 0.0, 0.0), (91.0, 0.0, 0.0, 0.0)]:
        with pytest.raises(ValueError), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # geopy warns about |lat| > 90 too
            geodesic((bad[0], bad[1]), (bad[2], bad[3]))
        with pytest.raises(ValueError), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            geodesic_km(*bad)


def test_scalar_vincenty_is_the_vectorised_one_and_within_a_millimetre_of_karney() -> None:
    rng = np.random.default_rng(19)
    n = 3000
    lat1, lon1 = rng.uniform(-90, 90, n), rng.uniform(-180, 180, n)
    lat2, lon2 = rng.uniform(-90, 90, n), rng.uniform(-180, 180, n)
    lat2[:1000] = np.clip(lat1[:1000] + rng.normal(0, 0.05, 1000), -90, 90)  # short lines
    lon2[:1000] = lon1[:1000] + rng.normal(0, 0.05, 1000)  # some past +-180
    lat2[1000:1100], lon2[1000:1100] = -lat1[1000:1100], lon1[1000:1100] + 179.9  # antipodal-ish
    cases: list[tuple[float, ...]] = [
        tuple(float(v) for v in p) for p in zip(lat1, lon1, lat2, lon2, strict=True)
    ]
    cases += [
        (0.0, 0.0, 0.0, 0.0),
        (45.0, 7.0, 45.0, 7.0),
        (90.0, 0.0, -90.0, 0.0),
        (90.0, 10.0, 90.0, -170.0),
        (0.0, 179.9, 0.0, -179.9),
        (0.0, 0.0, 0.0, 180.0),  # antipodes: no convergence, Karney's answer
        (0.0, 0.0, 0.5, 179.7),
        (10.0, 190.0, 10.0, -350.0),
        (48.5734, 7.7521, 48.5729, 7.8155),  # Strasbourg -> Kehl
    ]
    array = geodesic_km_array(*(np.array(c) for c in zip(*cases, strict=True)))
    for case, vectorised in zip(cases, array, strict=True):
        got, exact = vincenty_km(*case), geodesic_km(*case)
        assert abs(got - exact) < 1e-6, case  # km: a millimetre
        assert abs(got - vectorised) <= 1e-9 + 1e-12 * exact, case
    for bad in [(math.nan, 0.0, 0.0, 0.0), (0.0, math.inf, 0.0, 0.0), (91.0, 0.0, 0.0, 0.0)]:
        with pytest.raises(ValueError), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            vincenty_km(*bad)


def test_vectorised_geodesic_handles_nan_and_identical_points() -> None:
    got = geodesic_km_array(
        [0.0, math.nan, 45.0], [0.0, 1.0, 7.0], [0.0, 1.0, 45.0], [0.0, 1.0, 7.0]
    )
    assert got[0] == 0.0 and math.isnan(got[1]) and got[2] == 0.0


def test_haversine_bounds_the_geodesic() -> None:
    rng = np.random.default_rng(3)
    n = 3000
    lat1, lon1 = rng.uniform(-89.9, 89.9, n), rng.uniform(-180, 180, n)
    lat2 = np.clip(lat1 + rng.normal(0, 0.5, n), -90, 90)  # short, mostly meridional lines
    lon2 = lon1 + rng.normal(0, 0.05, n)
    lat2[:1000], lon2[:1000] = rng.uniform(-90, 90, 1000), rng.uniform(-180, 180, 1000)
    exact = geodesic_km_array(lat1, lon1, lat2, lon2)
    sphere = np.array([haversine_km(*p) for p in zip(lat1, lon1, lat2, lon2, strict=True)])
    ratio = exact[sphere > 0] / sphere[sphere > 0]
    assert ratio.min() >= HAVERSINE_LOW and ratio.max() <= HAVERSINE_HIGH


# --- the rule -----------------------------------------------------------------------------


def test_london_to_sydney_in_three_minutes_alerts_with_evidence() -> None:
    alert = check_travel("card-1", pos("a", 0, LONDON), pos("b", 3 * MIN, SYDNEY), P)
    assert alert is not None
    assert alert.rule == "impossible_travel" and alert.label == "impossible_travel"
    assert alert.event_ids == ("a", "b") and alert.event_time == 3 * MIN
    ev = alert.evidence
    assert ev["distance_km"] == pytest.approx(geodesic_km(*LONDON, *SYDNEY))
    assert ev["gap_s"] == 180 and ev["speed_kmh"] > 300_000
    assert ev["max_speed_kmh"] == P.max_speed_kmh and ev["skew_allowance_s"] == 120


@pytest.mark.parametrize(
    ("a", "b", "gap_ms"),
    [
        (LONDON, NEW_YORK, 8 * HOUR),  # a real flight
        (NEW_YORK, LONDON, 6 * HOUR + 30 * MIN),  # a fast eastbound one
        (STRASBOURG, KEHL, 10 * MIN),  # across the Rhine
        (STRASBOURG, KEHL, -45_000),  # nearby, clocks disagree: negative gap
        (PARIS, LYON, 2 * HOUR),  # high-speed train
    ],
)
def test_hard_negatives_do_not_alert(
    a: tuple[float, float], b: tuple[float, float], gap_ms: int
) -> None:
    assert check_travel("card-1", pos("a", 0, a), pos("b", gap_ms, b), P) is None


def test_fast_but_not_impossible_boundary_uses_skew_allowance() -> None:
    distance = geodesic_km(*PARIS, *LYON)
    limit_ms = (fastest_s(distance, P) - P.skew_allowance_s) * 1000
    just_in, just_out = math.floor(limit_ms), math.ceil(limit_ms)
    assert just_in < limit_ms < just_out
    assert check_travel("c", pos("a", 0, PARIS), pos("b", just_in, LYON), P) is not None
    assert check_travel("c", pos("a", 0, PARIS), pos("b", just_out, LYON), P) is None


def _exact_rule(
    previous: Position, current: Position, params: TravelParams
) -> tuple[bool, float, float]:
    """The rule on the exact geodesic, no shortcut: (impossible, distance, gap_s)."""
    distance = geodesic_km(previous.lat, previous.lon, current.lat, current.lon)
    gap_s = abs(current.event_time - previous.event_time) / 1000.0
    return bool(is_impossible(distance, gap_s, params)), distance, gap_s


def _meridian_point(start: tuple[float, float], km: float) -> tuple[float, float]:
    """A point due north of `start` at `km` on the geodesic (bisection to ~1e-12 degrees)."""
    lo, hi = 0.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if geodesic_km(*start, start[0] + mid, start[1]) < km else (lo, mid)
    return start[0] + hi, start[1]


@pytest.mark.parametrize(
    "params",
    [
        P,
        TravelParams(max_ground_speed_kmh=None),
        TravelParams(overhead_s=0, skew_allowance_s=0),
        TravelParams(min_distance_km=2_000, max_speed_kmh=900, max_ground_speed_kmh=120),
        TravelParams(min_distance_km=0, skew_allowance_s=0, overhead_s=0),
    ],
)
def test_haversine_shortcut_decides_as_the_exact_rule(params: TravelParams) -> None:
    """`check_travel` rules most pairs out on a haversine bound; on a seeded random set, and
    on pairs placed on the rule's boundaries (the gap at which a distance stops being
    impossible, to the millisecond, and distances at min_distance_km), it decides exactly as
    the rule on the exact geodesic, and its alerts carry the exact distance."""
    pairs, boundary = _rule_pairs(params)
    outcomes = {True: 0, False: 0}
    for previous, current in pairs:
        impossible, distance, _ = _exact_rule(previous, current, params)
        alert = check_travel("card", previous, current, params)
        assert (alert is not None) == impossible, (previous, current)
        if alert is not None:
            assert alert == pair_alert("card", previous, current, distance, params)
        outcomes[impossible] += 1
    assert boundary > 1000 and min(outcomes.values()) > 100, outcomes


@pytest.mark.parametrize(
    "params",
    [
        P,
        TravelParams(overhead_s=0, skew_allowance_s=0),
        TravelParams(min_distance_km=2_000, max_speed_kmh=900, max_ground_speed_kmh=120),
        TravelParams(min_distance_km=0, skew_allowance_s=0, overhead_s=0),
    ],
)
def test_evidence_distance_is_the_rules_distance_wherever_it_could_matter(
    params: TravelParams,
) -> None:
    """`pair_distance_km` (the endpoint's evidence for pairs that did not alert) is Karney's
    distance, bit for bit, wherever `check_travel` measures one (near or past the threshold:
    every boundary pair), and Vincenty's within a millimetre elsewhere; on every pair the rule
    on it decides as the rule on the exact geodesic."""
    pairs, _ = _rule_pairs(params)
    exact_ones = 0
    for previous, current in pairs:
        impossible, distance, gap_s = _exact_rule(previous, current, params)
        got = pair_distance_km(previous, current, params)
        assert bool(is_impossible(got, gap_s, params)) == impossible, (previous, current)
        bound = haversine_km(previous.lat, previous.lon, current.lat, current.lon)
        if is_impossible(bound * HAVERSINE_HIGH, gap_s, params):
            assert got == distance, (previous, current)
            exact_ones += 1
        else:
            assert abs(got - distance) < 1e-6, (previous, current)
    assert exact_ones > 1000


def _rule_pairs(params: TravelParams) -> tuple[list[tuple[Position, Position]], int]:
    """Seeded random pairs of every scale, then pairs on the rule's boundaries (see above);
    and how many of those there are."""
    rng = np.random.default_rng(2024)
    pairs: list[tuple[Position, Position]] = []
    for i in range(3000):
        lat1, lon1 = float(rng.uniform(-85, 85)), float(rng.uniform(-180, 180))
        spread = float(rng.choice([0.5, 5.0, 40.0, 180.0]))
        lat2 = float(np.clip(lat1 + rng.normal(0, spread), -90, 90))
        lon2 = float(lon1 + rng.normal(0, spread))
        gap_ms = int(rng.choice([-1, 1]) * rng.exponential(float(rng.choice([6e4, 3.6e6, 3.6e7]))))
        pairs.append((Position(f"a{i}", 0, lat1, lon1), Position(f"b{i}", gap_ms, lat2, lon2)))
    boundary = 0
    for i in range(600):  # the threshold boundary in time: just in, at, just out
        a = Position(f"c{i}", 0, float(rng.uniform(-80, 80)), float(rng.uniform(-180, 180)))
        b = Position(
            f"d{i}",
            0,
            float(np.clip(a.lat + rng.normal(0, 20), -90, 90)),
            float(a.lon + rng.normal(0, 20)),
        )
        limit_ms = (fastest_s(_exact_rule(a, b, params)[1], params) - params.skew_allowance_s) * 1e3
        for t in {
            math.floor(limit_ms) - 1,
            math.floor(limit_ms),
            math.ceil(limit_ms),
            math.ceil(limit_ms) + 1,
        }:
            if t >= 0:
                pairs.append((a, b._replace(event_time=t)))
                boundary += 1
    for i, km in enumerate(np.linspace(-1e-6, 1e-6, 9)):  # at min_distance_km, no time gap
        start = (float(rng.uniform(-60, 60)), float(rng.uniform(-180, 180)))
        end = _meridian_point(start, params.min_distance_km + float(km))
        pairs.append((Position(f"e{i}", 0, *start), Position(f"f{i}", 0, *end)))
    return pairs, boundary


def test_rule_boundaries_are_strict() -> None:
    p = TravelParams(
        min_distance_km=100, skew_allowance_s=0, overhead_s=0, max_ground_speed_kmh=None
    )
    assert not is_impossible(100.0, 0.0, p)  # distance must exceed min_distance_km
    assert is_impossible(100.001, 0.0, p)
    needed = 200.0 * 3600 / p.max_speed_kmh
    assert not is_impossible(200.0, needed, p)  # exactly fast enough
    assert is_impossible(200.0, needed - 1e-6, p)


def test_card_not_present_never_alerts_or_moves_the_last_position() -> None:
    state = TravelState("card-1")
    assert state.update("a", 0, *LONDON) == []
    assert state.update("web", 1 * HOUR, None, None) == []
    assert state.update("web2", 2 * HOUR, *SYDNEY, card_present=False) == []
    assert state.last() == pos("a", 0, LONDON)
    assert state.update("b", 8 * HOUR, *NEW_YORK) == []  # flew, bought online en route


def test_online_use_while_travelling_vectorised() -> None:
    uses = pd.DataFrame(
        {
            "entity_id": "card-1",
            "event_id": ["a", "web", "b"],
            "event_time": [0, 1 * HOUR, 8 * HOUR],
            "lat": [LONDON[0], SYDNEY[0], NEW_YORK[0]],
            "lon": [LONDON[1], SYDNEY[1], NEW_YORK[1]],
            "card_present": [True, False, True],
        }
    )
    assert travel_alerts(uses).empty
    uses.loc[1, "card_present"] = True
    assert travel_alerts(uses)["event_ids"].tolist() == [["a", "web"], ["web", "b"]]


def test_duplicates_are_ignored() -> None:
    state = TravelState("card-1")
    state.update("a", 0, *LONDON)
    assert len(state.update("b", 3 * MIN, *SYDNEY)) == 1
    assert state.update("b", 3 * MIN, *SYDNEY) == []
    frame = pd.DataFrame(
        {
            "entity_id": "card-1",
            "event_id": ["b", "a", "b"],
            "event_time": [3 * MIN, 0, 3 * MIN],
            "lat": [SYDNEY[0], LONDON[0], SYDNEY[0]],
            "lon": [SYDNEY[1], LONDON[1], SYDNEY[1]],
        }
    )
    assert len(travel_alerts(frame)) == 1


def test_late_event_is_judged_against_its_event_time_neighbours() -> None:
    # London at 0, New York at 8 h (fine). A late use in Sydney stamped 4 h arrives last:
    # it is impossible against both neighbours, and names the later event of each pair.
    state = TravelState("card-1")
    state.update("lon", 0, *LONDON)
    state.update("nyc", 8 * HOUR, *NEW_YORK)
    alerts = state.update("syd", 4 * HOUR, *SYDNEY)
    assert sorted(a.event_ids for a in alerts) == [("lon", "syd"), ("syd", "nyc")]
    assert sorted(a.event_time for a in alerts) == [4 * HOUR, 8 * HOUR]
    # A late use in London stamped 1 h is fine against London at 0 and is compared with
    # Sydney (its later neighbour now), not with New York.
    assert [a.event_ids for a in state.update("lon2", 1 * HOUR, *LONDON)] == [("lon2", "syd")]


def test_check_does_not_change_state() -> None:
    state = TravelState("card-1")
    state.update("a", 0, *LONDON)
    assert len(state.check("b", 3 * MIN, *SYDNEY)) == 1
    assert len(state.check("b", 3 * MIN, *SYDNEY)) == 1
    assert state.last() == pos("a", 0, LONDON)


def test_state_snapshot_round_trip() -> None:
    state = TravelState("card-1", max_positions=2)
    for i, place in enumerate([LONDON, PARIS, NEW_YORK]):
        state.update(f"e{i}", i * 24 * HOUR, *place)
    again = TravelState("card-1", max_positions=2)
    again.load_json(state.to_json())
    assert (
        again.positions
        == state.positions
        == [
            pos("e1", 24 * HOUR, PARIS),
            pos("e2", 48 * HOUR, NEW_YORK),
        ]
    )
    assert again.update("e2", 0, *SYDNEY) == []  # still remembered as seen


def _random_uses(rng: np.random.Generator, n: int) -> pd.DataFrame:
    cities = np.array([LONDON, NEW_YORK, SYDNEY, STRASBOURG, KEHL, PARIS, LYON])
    idx = rng.integers(0, len(cities), n)
    lat = cities[idx, 0] + rng.normal(0, 0.01, n)
    lon = cities[idx, 1] + rng.normal(0, 0.01, n)
    lat[rng.random(n) < 0.15] = np.nan  # online
    return pd.DataFrame(
        {
            "entity_id": "card-1",
            "event_id": [f"t{i:03}" for i in range(n)],
            "event_time": np.cumsum(rng.integers(1, 12 * HOUR, n)),
            "lat": lat,
            "lon": lon,
        }
    )


def _stateful(rows: pd.DataFrame, state: TravelState) -> set[str]:
    ids: set[str] = set()
    for r in rows.itertuples(index=False):
        lat = None if math.isnan(r.lat) else r.lat
        for alert in state.update(r.event_id, r.event_time, lat, r.lon):
            ids.add(alert.alert_id)
    return ids


def test_stateful_and_vectorised_agree_in_order_and_on_disorder() -> None:
    rng = np.random.default_rng(11)
    for _ in range(5):
        uses = _random_uses(rng, 60)
        vectorised = set(travel_alerts(uses)["alert_id"])
        assert vectorised  # the random walk does contain impossible pairs
        assert _stateful(uses, TravelState("card-1")) == vectorised
        shuffled = pd.concat([uses, uses.sample(10, random_state=1)]).sample(frac=1, random_state=2)
        late = _stateful(shuffled, TravelState("card-1", max_positions=100))
        assert late >= vectorised  # every final neighbour pair is checked; early pairs may add


def test_gps_jump_skips_tunnels_and_flags_jumps() -> None:
    rows = pd.DataFrame(
        {
            "entity_id": "v1",
            "event_id": list("abcde"),
            "event_time": [0, 1_000, 60_000, 61_000, 62_000],
            "lat": [48.0, np.nan, 48.01, 48.5, 48.501],
            "lon": [7.0, np.nan, 7.0, 7.0, 7.0],
        }
    )
    # a -> c: 1.1 km in 60 s is 67 km/h (the tunnel's missing fix is skipped); c -> d jumps 54 km
    alerts = gps_jump_alerts(rows)
    assert alerts["event_ids"].tolist() == [["c", "d"]]
    assert alerts["rule"].tolist() == ["gps_jump"]
    state = GpsJumpState("v1")
    fired = [
        a for r in rows.itertuples() for a in state.update(r.event_id, r.event_time, r.lat, r.lon)
    ]
    assert [a.alert_id for a in fired] == alerts["alert_id"].tolist()
