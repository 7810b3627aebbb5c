"""Real ports and real sea lanes: searoute's port table (UN/LOCODE, coordinates) and its
maritime network (shortest sea route between two points), both shipped inside the package, so
this works offline. A lane is resampled to arrays of cumulative nautical miles, lat and lon.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

import numpy as np

from core.errors import StreamsimError

EARTH_NM = 3440.065  # mean Earth radius in nautical miles


@dataclass(frozen=True)
class Port:
    code: str  # UN/LOCODE
    name: str
    country: str
    lat: float
    lon: float


@cache
def port_table() -> dict[str, Port]:
    data = json.loads(files("searoute.data").joinpath("ports.geojson").read_text())
    out: dict[str, Port] = {}
    for f in data["features"]:
        p = f["properties"]
        lon, lat = f["geometry"]["coordinates"]
        out.setdefault(p["port"], Port(p["port"], p["name"], p.get("cty", ""), lat, lon))
    return out


def ports(codes: list[str]) -> list[Port]:
    table = port_table()
    unknown = [c for c in codes if c not in table]
    if unknown:
        raise StreamsimError(
            f"domain.services names ports not in the port table: {unknown} (UN/LOCODEs of "
            "searoute's ports, e.g. SGSIN, NLRTM)"
        )
    return [table[c] for c in codes]


def haversine_nm(
    lat1: np.ndarray, lon1: np.ndarray, lat2: np.ndarray, lon2: np.ndarray
) -> np.ndarray:
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dp, dl = p2 - p1, np.radians(lon2 - lon1)
    a = np.sin(dp / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * EARTH_NM * np.arcsin(np.sqrt(np.minimum(a, 1.0)))


def bearing_deg(
    lat1: np.ndarray, lon1: np.ndarray, lat2: np.ndarray, lon2: np.ndarray
) -> np.ndarray:
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dl = np.radians(lon2 - lon1)
    y = np.sin(dl) * np.cos(p2)
    x = np.cos(p1) * np.sin(p2) - np.sin(p1) * np.cos(p2) * np.cos(dl)
    return np.mod(np.degrees(np.arctan2(y, x)), 360.0)


@dataclass(frozen=True)
class Lane:
    """A sea lane from one port to the next: vertices with cumulative distance."""

    s_nm: np.ndarray
    lat: np.ndarray
    lon: np.ndarray
    heading: np.ndarray  # per segment (len - 1), degrees true

    @property
    def length_nm(self) -> float:
        return float(self.s_nm[-1])

    def at(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """lat, lon and heading at distances `s` along the lane."""
        s = np.clip(s, 0.0, self.length_nm)
        seg = np.clip(np.searchsorted(self.s_nm, s, side="right") - 1, 0, len(self.heading) - 1)
        s0, s1 = self.s_nm[seg], self.s_nm[seg + 1]
        f = np.where(s1 > s0, (s - s0) / np.maximum(s1 - s0, 1e-9), 0.0)
        lat = self.lat[seg] + f * (self.lat[seg + 1] - self.lat[seg])
        dlon = np.mod(self.lon[seg + 1] - self.lon[seg] + 180.0, 360.0) - 180.0
        lon = np.mod(self.lon[seg] + f * dlon + 180.0, 360.0) - 180.0
        return lat, lon, self.heading[seg]


@cache
def lane(a: str, b: str) -> Lane:
    """The shortest sea route from port a to port b (searoute's maritime network)."""
    import searoute

    pa, pb = port_table()[a], port_table()[b]
    feature = searoute.searoute(
        [pa.lon, pa.lat], [pb.lon, pb.lat], units="naut", append_orig_dest=True
    )
    coords = np.asarray(feature["geometry"]["coordinates"], dtype=np.float64)
    if coords.shape[0] < 2:
        raise StreamsimError(f"no sea route from {a} to {b}")
    lon, lat = coords[:, 0], coords[:, 1]
    keep = np.r_[True, (np.abs(np.diff(lat)) + np.abs(np.diff(lon))) > 1e-9]
    lat, lon = lat[keep], lon[keep]
    if lat.shape[0] < 2:
        lat, lon = np.r_[lat, lat], np.r_[lon, lon + 1e-6]
    step = haversine_nm(lat[:-1], lon[:-1], lat[1:], lon[1:])
    s = np.r_[0.0, np.cumsum(step)]
    return Lane(s, lat, lon, bearing_deg(lat[:-1], lon[:-1], lat[1:], lon[1:]))


def offset(
    lat: np.ndarray, lon: np.ndarray, heading: np.ndarray, nm: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Move points `nm` nautical miles to starboard of `heading` (negative: to port)."""
    side = np.radians(heading + 90.0)
    dlat = nm * np.cos(side) / 60.0
    dlon = nm * np.sin(side) / (60.0 * np.maximum(np.cos(np.radians(lat)), 0.05))
    return np.clip(lat + dlat, -89.9, 89.9), np.mod(lon + dlon + 180.0, 360.0) - 180.0
