"""Routes without a road network: plausible polylines between two cities, made once per trip.

Geometry: the straight line from origin to destination (through a town near the line, when one
is drawn), each leg bent sideways by a smooth sum of sine harmonics (amplitudes falling as
k^-1.5, down to ~8 km half-waves, at most 16 per leg), sampled every ~800 m. Positions are
continuous: a vehicle moves along the polyline by arc length.

Road classes along the way: town streets at both ends (longer for bigger cities), rural access
roads, and a motorway in between on longer routes (shorter routes stay rural, and pass through
the town on the way as town streets). Each class is cut into stretches with one speed limit.
Zones overlay rural roads and motorways: tunnels (no GPS, no network), dead zones (no network)
and climbs (coolant rises). Stops (lights, junctions, queues) are drawn per class; the last stop
is the destination.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from core.geo import EARTH_RADIUS_KM, haversine_km
from scenarios.vehicles.cities import Cities
from scenarios.vehicles.config import ROAD_CLASSES, RoadClass, Roads, Trips, Zones

SPACING_M = 800.0
MEANDER_M = 8000.0  # the shortest bend's half wavelength (at most MAX_HARMONICS per leg)
MAX_HARMONICS = 16
M_PER_DEG = EARTH_RADIUS_KM * 1000 * math.pi / 180
MOTORWAY, RURAL, URBAN = (ROAD_CLASSES.index(c) for c in ("motorway", "rural", "urban"))
NO_ZONE, TUNNEL, DEAD_ZONE, HILL = 0, 1, 2, 3
TOWN_M = 1500.0  # length of the town streets where a rural route passes through a town
MIN_STRETCH_M = 300.0


@dataclass
class Route:
    """Vertices by arc length; edge attributes belong to the edge starting at each vertex (the
    last vertex repeats the last edge's)."""

    s: np.ndarray  # float64 metres from the start
    lat: np.ndarray
    lon: np.ndarray
    heading: np.ndarray  # float32 degrees clockwise from north
    road: np.ndarray  # int8 index into ROAD_CLASSES
    limit: np.ndarray  # int16 km/h
    zone: np.ndarray  # int8 NO_ZONE, TUNNEL, DEAD_ZONE or HILL
    grade: np.ndarray  # float32 rise per metre (climbs only)
    zone_end: np.ndarray  # float64 where the run of edges with this vertex's zone ends
    road_end: np.ndarray  # float64 where the run of edges with this vertex's road class ends
    stops: np.ndarray  # float64 positions where traffic stops; the last is the destination

    @property
    def length_m(self) -> float:
        return float(self.s[-1])


def _polyline(
    points: list[tuple[float, float]], bend: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Dense x, y (metres, local equirectangular) through the control points, and the origin."""
    lat0 = float(np.mean([p[0] for p in points]))
    lon0 = float(np.mean([p[1] for p in points]))
    kx = M_PER_DEG * math.cos(math.radians(lat0))
    xy = [((lon - lon0) * kx, (lat - lat0) * M_PER_DEG) for lat, lon in points]
    xs, ys = [], []
    for leg, ((px, py), (qx, qy)) in enumerate(itertools.pairwise(xy)):
        ell = math.hypot(qx - px, qy - py)
        m = max(int(ell / SPACING_M) + 1, 4)
        u = np.linspace(0.0, 1.0, m + 1)
        nx, ny = (-(qy - py) / ell, (qx - px) / ell) if ell > 0 else (0.0, 0.0)
        k = np.arange(1, min(max(3, int(ell / MEANDER_M)), MAX_HARMONICS) + 1)
        amp = ell * bend * rng.normal(0.0, 1.0, k.shape[0]) / k**1.5
        off = np.sin(np.pi * np.outer(u, k)) @ amp
        x, y = px + u * (qx - px) + off * nx, py + u * (qy - py) + off * ny
        last = leg == len(xy) - 2
        xs.append(x if last else x[:-1])
        ys.append(y if last else y[:-1])
    return np.concatenate(xs), np.concatenate(ys), lat0, lon0


def _pick(weights: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """n indices drawn with the given weights (faster than Generator.choice for small n)."""
    cum = np.cumsum(weights)
    return np.minimum(np.searchsorted(cum, rng.random(n) * cum[-1], side="right"), len(cum) - 1)


def _stretches(
    lo: float, hi: float, cls: RoadClass, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Starts and speed limits of stretches with one limit covering [lo, hi)."""
    limits = np.asarray(cls.speed_limits_kmh)
    w = np.asarray(cls.limit_weights or [1.0] * len(limits), dtype=np.float64)
    starts = [np.array([lo])]
    end = lo
    while end < hi - 1.0:  # lengths in batches until they cover the range
        lengths = np.maximum(cls.stretch_km.sample(rng, 8) * 1000, MIN_STRETCH_M)
        more = end + np.cumsum(lengths)
        starts.append(more)
        end = float(more[-1])
    at = np.concatenate(starts)
    at = at[at < hi - 1.0]
    return at, limits[_pick(w, rng, at.shape[0])]


def _class_ranges(
    length: float,
    urban_a: float,
    urban_b: float,
    town_at: float | None,
    roads: Roads,
    rng: np.random.Generator,
) -> list[tuple[float, float, int]]:
    """(start, end, road class) covering [0, length)."""
    ua, ub = min(urban_a, 0.3 * length), min(urban_b, 0.3 * length)
    mid_lo, mid_hi = ua, length - ub
    ranges = [(0.0, ua, URBAN)]
    if length >= roads.motorway_min_km * 1000:
        quarter = (mid_hi - mid_lo) / 4
        acc_a = min(float(roads.access_km.sample(rng, 1)[0]) * 1000, quarter)
        acc_b = min(float(roads.access_km.sample(rng, 1)[0]) * 1000, quarter)
        ranges += [
            (mid_lo, mid_lo + acc_a, RURAL),
            (mid_lo + acc_a, mid_hi - acc_b, MOTORWAY),
            (mid_hi - acc_b, mid_hi, RURAL),
        ]
    elif town_at is not None and mid_lo + TOWN_M < town_at < mid_hi - TOWN_M:
        half = TOWN_M / 2
        ranges += [
            (mid_lo, town_at - half, RURAL),
            (town_at - half, town_at + half, URBAN),
            (town_at + half, mid_hi, RURAL),
        ]
    else:
        ranges.append((mid_lo, mid_hi, RURAL))
    ranges.append((mid_hi, length, URBAN))
    return [(a, b, c) for a, b, c in ranges if b - a > 1.0]


def _zones(
    ranges: list[tuple[float, float, int]], zones: Zones, rng: np.random.Generator
) -> list[tuple[float, float, int, float]]:
    """(start, end, kind, grade) of zones, each inside one rural or motorway range: a Poisson
    process of zones along the road, kinds by their rates."""
    rates = np.array([zones.tunnels_per_100km, zones.dead_zones_per_100km, zones.hills_per_100km])
    total = rates.sum() / 100_000  # per metre
    if total <= 0:
        return []
    out = []
    for lo, hi, road in ranges:
        if road == URBAN:
            continue
        n = int(rng.poisson(total * (hi - lo)))
        if n == 0:
            continue
        starts = np.sort(rng.uniform(lo, hi, n))
        kinds = _pick(rates, rng, n)
        length = np.empty(n)
        for kind, dist in enumerate((zones.tunnel_km, zones.dead_zone_km, zones.hill_km)):
            mine = kinds == kind
            if mine.any():
                length[mine] = dist.sample(rng, int(mine.sum())) * 1000
        length = np.where(kinds == 0, np.clip(length, 100.0, 5000.0), np.maximum(length, 100.0))
        grades = np.maximum(zones.hill_grade_pct.sample(rng, n), 0.5) / 100
        free = lo
        for a, size, kind, g in zip(starts, length, kinds, grades, strict=True):
            if a >= free and a + size < hi - 200.0:  # no overlaps: a zone inside a zone is lost
                out.append(
                    (float(a), float(a + size), int(kind) + 1, float(g) if kind == 2 else 0.0)
                )
                free = a + size + 50.0
    return out


def _stops(
    lo: np.ndarray,
    road: np.ndarray,
    length: float,
    zones: list[tuple[float, float, int, float]],
    roads: Roads,
    rng: np.random.Generator,
) -> np.ndarray:
    per_km = np.array([0.0, 0.0, 0.0])
    per_km[[MOTORWAY, RURAL, URBAN]] = (
        roads.motorway.stops_per_km,
        roads.rural.stops_per_km,
        roads.urban.stops_per_km,
    )
    hi = np.append(lo[1:], length)
    counts = rng.poisson(per_km[road] * (hi - lo) / 1000)
    stops = np.sort(
        np.repeat(lo, counts) + rng.random(int(counts.sum())) * np.repeat(hi - lo, counts)
    )
    stops = stops[(stops > 30.0) & (stops < length - 30.0)]
    for a, b, kind, _ in zones:
        if kind == TUNNEL:
            stops = stops[(stops < a - 50.0) | (stops > b + 50.0)]
    return np.append(stops, length)


def _run_ends(values: np.ndarray) -> np.ndarray:
    """For each vertex, the vertex where its run of equal values ends."""
    change = np.flatnonzero(values[1:] != values[:-1]) + 1  # where a new run starts
    ends = np.append(change, values.shape[0] - 1)
    return ends[np.searchsorted(change, np.arange(values.shape[0]), side="right")]


def make_route(
    cities: Cities,
    origin: int,
    destination: int,
    roads: Roads,
    zones: Zones,
    trips: Trips,
    rng: np.random.Generator,
) -> Route:
    """A route from one city centre to another (see the module docstring)."""
    town = (
        cities.town_on_the_way(origin, destination, rng) if rng.random() < trips.via_town else None
    )
    stations = [origin] + ([town] if town is not None else []) + [destination]
    points = [(float(cities.lat[c]), float(cities.lon[c])) for c in stations]
    x, y, lat0, lon0 = _polyline(points, trips.bend, rng)
    kx = M_PER_DEG * math.cos(math.radians(lat0))
    lat_dense, lon_dense = lat0 + y / M_PER_DEG, lon0 + x / kx
    step_m = 1000 * haversine_km(lat_dense[:-1], lon_dense[:-1], lat_dense[1:], lon_dense[1:])
    s_dense = np.concatenate([[0.0], np.cumsum(step_m)])  # true distances, not projected
    length = float(s_dense[-1])
    town_at = None
    if town is not None:
        tx = (cities.lon[town] - lon0) * kx
        ty = (cities.lat[town] - lat0) * M_PER_DEG
        town_at = float(s_dense[int(np.argmin(np.hypot(x - tx, y - ty)))])
    ranges = _class_ranges(
        length,
        cities.urban_km(origin) * 1000,
        cities.urban_km(destination) * 1000,
        town_at,
        roads,
        rng,
    )
    classes = {URBAN: roads.urban, RURAL: roads.rural, MOTORWAY: roads.motorway}
    parts = [(_stretches(lo, hi, classes[road], rng), road) for lo, hi, road in ranges]
    piece_starts = np.concatenate([at for (at, _), _ in parts])
    piece_limits = np.concatenate([limits for (_, limits), _ in parts]).astype(np.int16)
    piece_roads = np.concatenate([np.full(at.shape[0], road, np.int8) for (at, _), road in parts])
    zone_list = _zones(ranges, zones, rng)
    breaks = np.concatenate([piece_starts, [z[0] for z in zone_list], [z[1] for z in zone_list]])
    breaks = np.unique(breaks[(breaks > 0) & (breaks < length)])
    if breaks.size:  # drop dense vertices within 1 m of a break: no tiny edges
        at = np.clip(np.searchsorted(breaks, s_dense), 1, breaks.size) - 1
        near = np.minimum(
            np.abs(s_dense - breaks[at]),
            np.abs(s_dense - breaks[np.minimum(at + 1, breaks.size - 1)]),
        )
        keep = (near > 1.0) | (s_dense == 0) | (s_dense == length)
        s = np.sort(np.concatenate([s_dense[keep], breaks]))
    else:
        s = s_dense
    lat, lon = np.interp(s, s_dense, lat_dense), np.interp(s, s_dense, lon_dense)
    mid = (s[:-1] + s[1:]) / 2
    k = np.clip(np.searchsorted(piece_starts, mid, side="right") - 1, 0, len(piece_starts) - 1)
    road, limit = piece_roads[k], piece_limits[k]
    zone = np.zeros(mid.shape[0], dtype=np.int8)
    grade = np.zeros(mid.shape[0], dtype=np.float32)
    for lo, hi, kind, g in zone_list:
        inside = (mid > lo) & (mid < hi)
        zone[inside] = kind
        grade[inside] = g
    dlat = np.diff(lat)
    dlon = np.diff(lon) * np.cos(np.radians((lat[:-1] + lat[1:]) / 2))
    heading = (np.degrees(np.arctan2(dlon, dlat)) % 360).astype(np.float32)

    def per_vertex(edge: np.ndarray) -> np.ndarray:
        return np.append(edge, edge[-1:])

    zone_v, road_v = per_vertex(zone), per_vertex(road)
    return Route(
        s=s,
        lat=lat,
        lon=lon,
        heading=per_vertex(heading),
        road=road_v,
        limit=per_vertex(limit),
        zone=zone_v,
        grade=per_vertex(grade),
        zone_end=s[_run_ends(zone_v)],
        road_end=s[_run_ends(road_v)],
        stops=_stops(piece_starts, piece_roads, length, zone_list, roads, rng),
    )
