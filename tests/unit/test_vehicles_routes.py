"""Cities from GeoNames, routes between them (geometry, road classes, zones, stops), and the
route pool that keeps every vehicle's route in flat arrays."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from core.geo import haversine_km
from scenarios.vehicles.cities import Cities
from scenarios.vehicles.config import Region, Roads, Trips, Zones
from scenarios.vehicles.route_pool import RoutePool
from scenarios.vehicles.routes import (
    DEAD_ZONE,
    HILL,
    MOTORWAY,
    SPACING_M,
    TUNNEL,
    URBAN,
    Route,
    make_route,
)

AT = datetime(2026, 3, 3, 8, tzinfo=UTC)


@pytest.fixture(scope="module")
def cities() -> Cities:
    return Cities.load(Region(), AT)


@pytest.fixture(scope="module")
def routes(cities: Cities) -> list[tuple[int, int, Route]]:
    rng = np.random.default_rng(5)
    out = []
    for _ in range(150):
        a = int(rng.integers(len(cities)))
        b = cities.destination(a, Trips(), rng)
        out.append((a, b, make_route(cities, a, b, Roads(), Zones(), Trips(), rng)))
    return out


def test_cities_are_real_german_cities_over_50k_with_local_time(cities: Cities) -> None:
    assert 100 < len(cities) <= 300
    assert cities.name[:3] == ["Berlin", "Hamburg", "Munich"]
    assert (cities.population >= 50_000).all()
    assert (
        (cities.lat > 47) & (cities.lat < 55.1) & (cities.lon > 5.8) & (cities.lon < 15.1)
    ).all()
    assert (cities.utc_offset_h == 1.0).all()  # CET in March, before the switch
    assert cities.km[0, 1] == pytest.approx(255, abs=5)  # Berlin - Hamburg


def test_region_by_countries_and_box_and_a_clear_error_when_empty() -> None:
    alps = Cities.load(Region(countries=["AT", "CH"], bbox=(46.0, 9.0, 48.5, 17.0)), AT)
    assert "Vienna" in alps.name and "Zurich" not in alps.name  # Zurich lies west of 9°E
    with pytest.raises(ValueError, match="at least 2"):
        Cities.load(Region(countries=["VA"]), AT)


def test_destinations_lie_within_the_trip_range(cities: Cities) -> None:
    rng = np.random.default_rng(1)
    trips = Trips(min_km=20, max_km=400)
    for a in range(0, len(cities), 7):
        b = cities.destination(a, trips, rng)
        assert b != a and 20 <= cities.km[a, b] <= 400


def test_routes_run_from_city_centre_to_city_centre_without_jumps(
    cities: Cities, routes: list[tuple[int, int, Route]]
) -> None:
    for a, b, r in routes:
        assert (r.lat[0], r.lon[0]) == pytest.approx((cities.lat[a], cities.lon[a]), abs=1e-6)
        assert (r.lat[-1], r.lon[-1]) == pytest.approx((cities.lat[b], cities.lon[b]), abs=1e-6)
        steps = np.diff(r.s)
        assert (steps > 0.5).all() and steps.max() <= 2 * SPACING_M
        km = haversine_km(r.lat[:-1], r.lon[:-1], r.lat[1:], r.lon[1:])
        assert np.allclose(km * 1000, steps, rtol=0.001, atol=0.5)  # arc length = the polyline's
        assert 1.0 <= r.length_m / 1000 / cities.km[a, b] < 1.5  # bent, not wild


def test_headings_follow_the_polyline(routes: list[tuple[int, int, Route]]) -> None:
    for _, _, r in routes[:30]:
        lat0, lat1 = np.radians(r.lat[:-1]), np.radians(r.lat[1:])
        dlon = np.radians(np.diff(r.lon))
        y = np.sin(dlon) * np.cos(lat1)
        x = np.cos(lat0) * np.sin(lat1) - np.sin(lat0) * np.cos(lat1) * np.cos(dlon)
        bearing = np.degrees(np.arctan2(y, x)) % 360
        diff = np.abs((bearing - r.heading[:-1] + 180) % 360 - 180)
        assert diff.max() < 2.0
        turn = np.abs((np.diff(r.heading[:-1]) + 180) % 360 - 180)
        assert np.median(turn) < 5  # smooth, apart from corners at a town on the way


def test_road_classes_urban_at_the_ends_and_motorways_only_on_long_routes(
    routes: list[tuple[int, int, Route]],
) -> None:
    long_with_motorway = 0
    for _, _, r in routes:
        assert r.road[0] == URBAN and r.road[-1] == URBAN
        has_motorway = (r.road == MOTORWAY).any()
        assert not has_motorway or r.length_m >= Roads().motorway_min_km * 1000
        long_with_motorway += has_motorway
        limits = {URBAN: {50, 30}, MOTORWAY: {130, 120, 100}, 1: {100, 80, 70}}
        for road, allowed in limits.items():
            assert set(r.limit[r.road == road].tolist()) <= allowed
    assert long_with_motorway > len(routes) / 2


def test_zones_lie_outside_towns_and_tunnels_have_no_stops(
    routes: list[tuple[int, int, Route]],
) -> None:
    kinds = set()
    for _, _, r in routes:
        zoned = r.zone[:-1] != 0
        assert (r.road[:-1][zoned] != URBAN).all()
        kinds |= set(r.zone[:-1][zoned].tolist())
        assert (r.grade[:-1][r.zone[:-1] == HILL] > 0).all()
        assert (r.grade[:-1][r.zone[:-1] != HILL] == 0).all()
        tunnel = np.flatnonzero(r.zone[:-1] == TUNNEL)
        for j in tunnel:
            inside = (r.stops > r.s[j]) & (r.stops < r.s[j + 1])
            assert not inside.any()
        ends = r.zone_end[:-1][zoned]
        assert (ends > r.s[:-1][zoned]).all() and (ends <= r.length_m).all()
    assert kinds == {TUNNEL, DEAD_ZONE, HILL}


def test_stops_are_sorted_and_end_at_the_destination(routes: list[tuple[int, int, Route]]) -> None:
    urban_rate = []
    for _, _, r in routes:
        assert (np.diff(r.stops) >= 0).all() and r.stops[-1] == r.length_m
        urban_m = np.diff(r.s)[r.road[:-1] == URBAN].sum()
        at = np.clip(np.searchsorted(r.s, r.stops[:-1], side="right") - 1, 0, len(r.s) - 2)
        urban_rate.append(((r.road[at] == URBAN).sum(), urban_m / 1000))
    stops, km = np.array(urban_rate).sum(axis=0)
    assert stops / km == pytest.approx(Roads().urban.stops_per_km, rel=0.2)


def test_the_pool_keeps_routes_apart_and_compacts_garbage(
    routes: list[tuple[int, int, Route]],
) -> None:
    pool = RoutePool(3, capacity=512)
    rs = [r for _, _, r in routes]
    current = {}
    for k in range(60):  # vehicles keep getting new routes: the pool compacts and grows
        v = np.array([k % 3])
        pool.assign(v, [rs[k]])
        current[k % 3] = rs[k]
    for v, r in current.items():
        lo, hi = pool.lo[v], pool.hi[v]
        assert np.array_equal(pool.v.cols["s"][lo:hi], r.s)
        assert np.array_equal(pool.v.cols["lat"][lo:hi], r.lat)
        assert np.array_equal(pool.st.cols["stop"][pool.stop_lo[v] : pool.stop_hi[v]], r.stops)
    appended = sum(len(r.s) for r in rs[:60])
    longest = max(len(r.s) for r in rs[:60])
    assert pool.v.used < appended / 2  # garbage was collected
    assert pool.v.capacity <= 2 ** int(np.ceil(np.log2(2 * 4 * longest)))
