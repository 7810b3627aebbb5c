"""core.geo: the one vectorised haversine and the GeoNames tables, read once."""

from __future__ import annotations

import numpy as np

from core.geo import geonames_cities, geonames_countries, haversine_km
from detectors.geo import haversine_km as detectors_haversine_km


def test_haversine_is_elementwise_and_agrees_with_the_detectors_copy() -> None:
    rng = np.random.default_rng(5)
    lat1, lat2 = rng.uniform(-90, 90, (2, 500))
    lon1, lon2 = rng.uniform(-180, 180, (2, 500))
    km = haversine_km(lat1, lon1, lat2, lon2)
    assert km.shape == (500,)
    one_by_one = [detectors_haversine_km(*p) for p in zip(lat1, lon1, lat2, lon2, strict=True)]
    assert np.allclose(km, one_by_one, rtol=1e-12, atol=1e-9)
    assert float(haversine_km(48.8566, 2.3522, 48.8566, 2.3522)) == 0.0


def test_the_city_tables_are_read_once() -> None:
    assert geonames_cities() is geonames_cities()
    assert len(geonames_cities()) > 30_000
    assert geonames_countries()["FR"]["currencycode"] == "EUR"
