"""Distances on the WGS84 ellipsoid: exact scalar (Karney), Vincenty (scalar and vectorised),
and a bound.

- `geodesic_km`: one pair, Karney's algorithm (geographiclib, nanometre accurate): exactly
  geopy's `geodesic(...).km`, without geopy's per-call set-up (a new `Geodesic` with its
  series coefficients each time).
- `geodesic_km_array`: many pairs at once, Vincenty's inverse formula in numpy (sub-millimetre
  where it converges; the rare nearly antipodal pairs where it does not fall back to geopy).
- `vincenty_km`: one pair, the same Vincenty iteration in plain floats (within 0.1 mm
  of Karney and within a few picometres of `geodesic_km_array`), falling back to
  `geodesic_km` where it does not converge: for distances a rule reports but does not decide
  on.
- `haversine_km`: a sphere, ~0.3 microseconds. On WGS84 the geodesic is within
  [`HAVERSINE_LOW`, `HAVERSINE_HIGH`] times the haversine distance, so a rule can rule out
  far-from-threshold pairs cheaply and pay for the exact distance only near its threshold.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from geographiclib.geodesic import Geodesic
from geopy.distance import ELLIPSOIDS, geodesic
from numpy.typing import ArrayLike, NDArray

EARTH_MEAN_RADIUS_KM = 6371.0088
#: geodesic / haversine lies within these bounds on WGS84 (the extremes, 0.9944 for short
#: meridional lines at the equator and 1.0045 near the poles, with a margin).
HAVERSINE_LOW, HAVERSINE_HIGH = 0.993, 1.006

_A = 6378.137  # WGS84 semi-major axis, km
_F = 1 / 298.257223563
_B = _A * (1 - _F)
_MAX_ITERATIONS = 200
#: The ellipsoid geopy's `geodesic` builds on every call (km units), built once.
_WGS84_KM = Geodesic(ELLIPSOIDS["WGS-84"][0], ELLIPSOIDS["WGS-84"][2])
_DISTANCE = Geodesic.DISTANCE


def geodesic_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Geodesic distance in km on WGS84.

    >>> round(geodesic_km(51.4700, -0.4543, 40.6413, -73.7781))  # Heathrow -> JFK
    5555
    """
    # geopy's point normalisation (`float(x or 0.0)`), then its `Inverse` call; coordinates
    # it would reject or wrap (non-finite, |lat| > 90, |lon| > 180) go through geopy itself.
    a, b, c, d = float(lat1 or 0.0), float(lon1 or 0.0), float(lat2 or 0.0), float(lon2 or 0.0)
    if abs(a) <= 90 and abs(c) <= 90 and abs(b) <= 180 and abs(d) <= 180:
        return float(_WGS84_KM.Inverse(a, b, c, d, _DISTANCE)["s12"]) + 0.0  # as geopy: no -0.0
    return float(geodesic((lat1, lon1), (lat2, lon2)).km)


def vincenty_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Geodesic distance in km on WGS84 by Vincenty's inverse formula (`geodesic_km` where it
    does not converge: nearly antipodal pairs, or coordinates out of range).

    >>> round(vincenty_km(51.4700, -0.4543, 40.6413, -73.7781), 6) == round(
    ...     geodesic_km(51.4700, -0.4543, 40.6413, -73.7781), 6)
    True
    """
    if not (abs(lat1) <= 90 and abs(lat2) <= 90 and abs(lon1) <= 360 and abs(lon2) <= 360):
        return geodesic_km(lat1, lon1, lat2, lon2)  # NaN, inf or out of range: geopy's verdict
    lon_diff = math.radians((lon2 - lon1 + 180.0) % 360.0 - 180.0)
    u1 = math.atan((1 - _F) * math.tan(math.radians(lat1)))
    u2 = math.atan((1 - _F) * math.tan(math.radians(lat2)))
    sin_u1, cos_u1, sin_u2, cos_u2 = math.sin(u1), math.cos(u1), math.sin(u2), math.cos(u2)
    # The terms of `_vincenty_terms`, inlined (this runs once per request in the endpoint).
    cos_u1_sin_u2, sin_u1_cos_u2 = cos_u1 * sin_u2, sin_u1 * cos_u2
    sin_u1_sin_u2, cos_u1_cos_u2 = sin_u1 * sin_u2, cos_u1 * cos_u2
    lam = lon_diff
    converged = False
    for iteration in range(_MAX_ITERATIONS + 1):
        sin_lam, cos_lam = math.sin(lam), math.cos(lam)
        sin_sigma = math.hypot(cos_u2 * sin_lam, cos_u1_sin_u2 - sin_u1_cos_u2 * cos_lam)
        cos_sigma = sin_u1_sin_u2 + cos_u1_cos_u2 * cos_lam
        sigma = math.atan2(sin_sigma, cos_sigma)
        sin_alpha = 0.0 if sin_sigma == 0 else cos_u1_cos_u2 * sin_lam / sin_sigma
        cos2_alpha = 1 - sin_alpha**2
        cos_2sm = 0.0 if cos2_alpha == 0 else cos_sigma - 2 * sin_u1_sin_u2 / cos2_alpha
        if converged or iteration == _MAX_ITERATIONS:  # the terms at the final lambda
            break
        c = _F / 16 * cos2_alpha * (4 + _F * (4 - 3 * cos2_alpha))
        new_lam = lon_diff + (1 - c) * _F * sin_alpha * (
            sigma + c * sin_sigma * (cos_2sm + c * cos_sigma * (-1 + 2 * cos_2sm**2))
        )
        converged = abs(new_lam - lam) < 1e-12
        lam = new_lam
    if not converged:
        return geodesic_km(lat1, lon1, lat2, lon2)
    if sin_sigma == 0:  # the same point (sigma 0), or antipodes (sigma pi): Karney's verdict
        return 0.0 if cos_sigma > 0 else geodesic_km(lat1, lon1, lat2, lon2)
    dist = _vincenty_distance(sin_sigma, cos_sigma, sigma, cos2_alpha, cos_2sm)
    if not (math.isfinite(dist) and abs(lam) <= math.pi + 1e-9):
        return geodesic_km(lat1, lon1, lat2, lon2)
    return dist


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in km on a sphere of the mean Earth radius.

    A copy on purpose: `core.geo.haversine_km` is the simulators' (vectorised); detectors import
    nothing of the project, so what they measure stays independent of how the truth was made.
    """
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dlat, dlon = p2 - p1, math.radians(lon2 - lon1)
    h = math.sin(dlat / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dlon / 2) ** 2
    return 2 * EARTH_MEAN_RADIUS_KM * math.asin(min(1.0, math.sqrt(h)))


def geodesic_km_array(
    lat1: ArrayLike, lon1: ArrayLike, lat2: ArrayLike, lon2: ArrayLike
) -> NDArray[np.float64]:
    """Geodesic distances in km for arrays of pairs (NaN where a coordinate is NaN).

    >>> geodesic_km_array([51.47], [-0.4543], [40.6413], [-73.7781]).round().tolist()
    [5555.0]
    """
    arrays = np.broadcast_arrays(
        *(np.asarray(a, dtype=np.float64) for a in (lat1, lon1, lat2, lon2))
    )
    la1, lo1, la2, lo2 = (a.ravel() for a in arrays)
    out = np.full(la1.shape, np.nan)
    ok = np.isfinite(la1) & np.isfinite(lo1) & np.isfinite(la2) & np.isfinite(lo2)
    pairs = la1[ok], lo1[ok], la2[ok], lo2[ok]
    dist, converged = _vincenty(*pairs)
    for i in np.flatnonzero(~converged):
        dist[i] = geodesic_km(*(float(a[i]) for a in pairs))
    out[ok] = dist
    return out.reshape(arrays[0].shape)


def _vincenty(
    lat1: NDArray[np.float64],
    lon1: NDArray[np.float64],
    lat2: NDArray[np.float64],
    lon2: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Vincenty's inverse formula; returns distances and which of them converged."""
    lon_diff = np.radians((lon2 - lon1 + 180.0) % 360.0 - 180.0)
    u1 = np.arctan((1 - _F) * np.tan(np.radians(lat1)))
    u2 = np.arctan((1 - _F) * np.tan(np.radians(lat2)))
    trig = np.sin(u1), np.cos(u1), np.sin(u2), np.cos(u2)
    lam = lon_diff.copy()
    todo = np.arange(lam.size)
    with np.errstate(invalid="ignore", divide="ignore"):
        for _ in range(_MAX_ITERATIONS):
            terms = _vincenty_terms(lam[todo], *(t[todo] for t in trig))
            sin_sigma, cos_sigma, sigma, sin_alpha, cos2_alpha, cos_2sm = terms
            c = _F / 16 * cos2_alpha * (4 + _F * (4 - 3 * cos2_alpha))
            new_lam = lon_diff[todo] + (1 - c) * _F * sin_alpha * (
                sigma + c * sin_sigma * (cos_2sm + c * cos_sigma * (-1 + 2 * cos_2sm**2))
            )
            moved = np.abs(new_lam - lam[todo])
            lam[todo] = new_lam
            todo = todo[~(moved < 1e-12)]
            if todo.size == 0:
                break
        sin_sigma, cos_sigma, sigma, _, cos2_alpha, cos_2sm = _vincenty_terms(lam, *trig)
        dist = _vincenty_distance(sin_sigma, cos_sigma, sigma, cos2_alpha, cos_2sm)
    converged = np.ones(lam.size, dtype=bool)
    converged[todo] = False
    converged &= np.isfinite(dist) & (np.abs(lam) <= math.pi + 1e-9)
    return np.where(sin_sigma == 0, 0.0, dist), converged


def _vincenty_distance(
    sin_sigma: Any, cos_sigma: Any, sigma: Any, cos2_alpha: Any, cos_2sm: Any
) -> Any:
    """Vincenty's distance in km from the converged terms; floats or arrays alike."""
    u_sq = cos2_alpha * (_A**2 - _B**2) / _B**2
    big_a = 1 + u_sq / 16384 * (4096 + u_sq * (-768 + u_sq * (320 - 175 * u_sq)))
    big_b = u_sq / 1024 * (256 + u_sq * (-128 + u_sq * (74 - 47 * u_sq)))
    correction = cos_sigma * (-1 + 2 * cos_2sm**2) - big_b / 6 * cos_2sm * (
        -3 + 4 * sin_sigma**2
    ) * (-3 + 4 * cos_2sm**2)
    delta_sigma = big_b * sin_sigma * (cos_2sm + big_b / 4 * correction)
    return _B * big_a * (sigma - delta_sigma)


def _vincenty_terms(
    lam: NDArray[np.float64],
    sin_u1: NDArray[np.float64],
    cos_u1: NDArray[np.float64],
    sin_u2: NDArray[np.float64],
    cos_u2: NDArray[np.float64],
) -> tuple[NDArray[np.float64], ...]:
    sin_lam, cos_lam = np.sin(lam), np.cos(lam)
    sin_sigma = np.hypot(cos_u2 * sin_lam, cos_u1 * sin_u2 - sin_u1 * cos_u2 * cos_lam)
    cos_sigma = sin_u1 * sin_u2 + cos_u1 * cos_u2 * cos_lam
    sigma = np.arctan2(sin_sigma, cos_sigma)
    sin_alpha = np.where(sin_sigma == 0, 0.0, cos_u1 * cos_u2 * sin_lam / sin_sigma)
    cos2_alpha = 1 - sin_alpha**2
    cos_2sm = np.where(cos2_alpha == 0, 0.0, cos_sigma - 2 * sin_u1 * sin_u2 / cos2_alpha)
    return sin_sigma, cos_sigma, sigma, sin_alpha, cos2_alpha, cos_2sm
