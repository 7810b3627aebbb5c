"""Impossible travel: two located uses of one card too far apart for the time between them.

The rule compares two positions (lat, lon, event time) of one entity. The pair is *impossible*
when the entity could not have covered the geodesic distance in the time between them:

    distance_km > min_distance_km  and  gap_s + skew_allowance_s < fastest_s(distance_km)

    fastest_s(d) = min(overhead_s + d / max_speed_kmh,   # fly: airports, then an airliner
                       d / max_ground_speed_kmh)         # drive or take a fast train

so a real flight (London -> New York in 8 h) or a short hop across a border (Strasbourg ->
Kehl in 10 min) never alerts, while London -> Sydney in 3 min does. The skew allowance absorbs
device clocks that disagree by up to a minute or two: a tiny or even negative gap between
nearby points never turns into a huge speed.

Only located (card-present) uses count: a use without a position (online, card not present,
GPS lost in a tunnel) never alerts and never replaces the last position.

Disorder: both forms compare each position with its nearest neighbours *in event time*. The
vectorised form sorts by event time, so it checks consecutive pairs. The stateful form keeps
the last `max_positions` positions sorted by event time and checks a new one against the
neighbours it lands between, so a late event is judged against the uses around it, not against
whatever arrived last. The alert of a pair names the later event of the pair, so it is the
same alert (same id) whichever of the two arrived second.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from pydantic import Field

from detectors.alert import Alert, Evidence
from detectors.dedup import SeenIds
from detectors.frames import EVENT_TIME, Columns, per_entity, prepare
from detectors.geo import (
    HAVERSINE_HIGH,
    geodesic_km,
    geodesic_km_array,
    haversine_km,
    vincenty_km,
)
from detectors.params import Thresholds, dumped
from detectors.snapshot import Snapshottable

RULE = "impossible_travel"


class TravelParams(Thresholds):
    """Thresholds of `impossible_travel` (defaults: cards)."""

    max_speed_kmh: float = Field(
        1000.0, gt=0, le=50_000, description="Fastest travel, km/h: an airliner with tailwind."
    )
    overhead_s: float = Field(
        1800.0,
        ge=0,
        le=86_400,
        description="Fixed extra time of a trip at max_speed_kmh (to, through and off airports).",
    )
    max_ground_speed_kmh: float | None = Field(
        350.0,
        gt=0,
        le=50_000,
        description="Fastest door-to-door ground travel (high-speed rail), km/h, no overhead. "
        "None: only the max_speed_kmh model.",
    )
    min_distance_km: float = Field(
        100.0,
        ge=0,
        le=25_000,
        description="Pairs closer never alert (GPS noise, geocoding, neighbouring towns).",
    )
    skew_allowance_s: float = Field(
        120.0,
        ge=0,
        le=86_400,
        description="Added to every gap: two devices' clocks may disagree by this much.",
    )


class Position(NamedTuple):
    """One located use of an entity."""

    event_id: str
    event_time: int
    lat: float
    lon: float


def position(
    event_id: str,
    event_time: int,
    lat: float | None,
    lon: float | None,
    card_present: bool | None = True,
) -> Position | None:
    """A `Position`, or None for a use without a valid location or not card-present."""
    if card_present is False or lat is None or lon is None:
        return None
    lat, lon = float(lat), float(lon)
    if not (math.isfinite(lat) and math.isfinite(lon) and abs(lat) <= 90 and abs(lon) <= 360):
        return None
    return Position(str(event_id), int(event_time), lat, lon)


def is_impossible(distance_km: Any, gap_s: Any, params: TravelParams) -> Any:
    """The rule itself, on floats or numpy arrays alike (gap_s is the absolute time gap)."""
    available = gap_s + params.skew_allowance_s
    far = distance_km > params.min_distance_km
    by_air = available < params.overhead_s + distance_km * 3600.0 / params.max_speed_kmh
    if params.max_ground_speed_kmh is None:
        return far & by_air
    return far & by_air & (available < distance_km * 3600.0 / params.max_ground_speed_kmh)


def fastest_s(distance_km: float, params: TravelParams) -> float:
    """The least time, in seconds, `distance_km` can be travelled in under `params`."""
    by_air = params.overhead_s + distance_km * 3600.0 / params.max_speed_kmh
    if params.max_ground_speed_kmh is None:
        return by_air
    return min(by_air, distance_km * 3600.0 / params.max_ground_speed_kmh)


def travel_evidence(distance_km: float, gap_s: float, params: TravelParams) -> Evidence:
    return {
        "distance_km": float(distance_km),
        "gap_s": float(gap_s),
        "speed_kmh": float(distance_km) * 3600.0 / gap_s if gap_s > 0 else None,
        "fastest_s": fastest_s(float(distance_km), params),
        **dumped(params),
    }


def pair_alert(
    entity_id: str,
    first: Position,
    second: Position,
    distance_km: float,
    params: TravelParams,
    rule: str = RULE,
    label: str | None = RULE,
) -> Alert:
    """The alert for an impossible pair, keyed by both event ids in event-time order."""
    early, late = sorted((first, second), key=lambda p: (p.event_time, p.event_id))
    ids = (early.event_id, late.event_id)
    gap_s = (late.event_time - early.event_time) / 1000.0
    evidence = travel_evidence(distance_km, gap_s, params)
    return Alert.make(rule, entity_id, late.event_time, ids, evidence, key=ids, label=label)


def check_travel(
    entity_id: str,
    previous: Position,
    current: Position,
    params: TravelParams,
    rule: str = RULE,
    label: str | None = RULE,
) -> Alert | None:
    """Per-request form: is going from `previous` to `current` impossible?

    Costs well under a microsecond unless the pair is near or past the threshold (a haversine
    bound rules the rest out); only then is the exact geodesic computed.

    >>> p = TravelParams()
    >>> london = Position("t1", 0, 51.5074, -0.1278)
    >>> sydney = Position("t2", 3 * 60_000, -33.8688, 151.2093)
    >>> check_travel("card-1", london, sydney, p).evidence["distance_km"] > 16_000
    True
    >>> new_york = Position("t3", 8 * 3_600_000, 40.7128, -74.0060)
    >>> check_travel("card-1", london, new_york, p) is None
    True
    """
    gap_s = abs(current.event_time - previous.event_time) / 1000.0
    if not _may_be_impossible(previous, current, gap_s, params):
        return None
    distance = geodesic_km(previous.lat, previous.lon, current.lat, current.lon)
    if not is_impossible(distance, gap_s, params):
        return None
    return pair_alert(entity_id, previous, current, distance, params, rule, label)


def pair_distance_km(previous: Position, current: Position, params: TravelParams) -> float:
    """The geodesic distance of a pair, for evidence: exactly the distance `check_travel`
    decides on (Karney's, `geodesic_km`) wherever it measures one (the pair is near or past
    the threshold), else Vincenty's on the same ellipsoid (`vincenty_km`: within 0.1 mm of
    Karney's, and much cheaper), where no sub-millimetre difference can change the verdict.

    >>> p = TravelParams()
    >>> a, b = Position("t1", 0, 48.8566, 2.3522), Position("t2", 3_600_000, 45.7640, 4.8357)
    >>> abs(pair_distance_km(a, b, p) - geodesic_km(a.lat, a.lon, b.lat, b.lon)) < 1e-6
    True
    """
    gap_s = abs(current.event_time - previous.event_time) / 1000.0
    if _may_be_impossible(previous, current, gap_s, params):
        return geodesic_km(previous.lat, previous.lon, current.lat, current.lon)
    return vincenty_km(previous.lat, previous.lon, current.lat, current.lon)


def _may_be_impossible(
    previous: Position, current: Position, gap_s: float, params: TravelParams
) -> bool:
    """The rule on an upper bound of the geodesic: False rules the pair out (the rule is
    monotonic in the distance)."""
    bound = haversine_km(previous.lat, previous.lon, current.lat, current.lon) * HAVERSINE_HIGH
    return bool(is_impossible(bound, gap_s, params))


def travel_alerts(
    df: pd.DataFrame,
    params: TravelParams | None = None,
    columns: Columns = None,
    rule: str = RULE,
    label: str | None = RULE,
) -> pd.DataFrame:
    """Vectorised form over a frame of uses (columns `lat`, `lon`, optional `card_present`).

    Sorts by event time and drops duplicate event ids first; rows without a location or with
    `card_present` false are skipped. Compares consecutive located uses of each entity.

    >>> uses = pd.DataFrame({"entity_id": "c1", "event_id": ["a", "b"],
    ...     "event_time": [0, 180_000], "lat": [51.5, -33.87], "lon": [-0.13, 151.21]})
    >>> travel_alerts(uses)[["rule", "event_time"]].values.tolist()
    [['impossible_travel', 180000]]
    """
    p = params or TravelParams()
    rows = prepare(df, ["lat", "lon"], ["card_present"], columns)
    rows = rows.loc[_located(rows)]

    def rule_for(entity_id: str, uses: pd.DataFrame) -> list[Alert]:
        if len(uses) < 2:
            return []
        lat, lon = uses["lat"].to_numpy(float), uses["lon"].to_numpy(float)
        times = uses[EVENT_TIME].to_numpy(np.int64)
        distance = geodesic_km_array(lat[:-1], lon[:-1], lat[1:], lon[1:])
        fired = np.flatnonzero(is_impossible(distance, np.diff(times) / 1000.0, p))
        positions = [
            Position(*row)
            for row in uses[["event_id", EVENT_TIME, "lat", "lon"]].itertuples(index=False)
        ]
        return [
            pair_alert(
                entity_id, positions[i], positions[i + 1], float(distance[i]), p, rule, label
            )
            for i in fired
        ]

    return per_entity(rows, rule_for)


def _located(rows: pd.DataFrame) -> pd.Series:
    lat = pd.to_numeric(rows["lat"], errors="coerce")
    lon = pd.to_numeric(rows["lon"], errors="coerce")
    ok = lat.notna() & lon.notna() & (lat.abs() <= 90) & (lon.abs() <= 360)
    if "card_present" in rows.columns:
        ok &= rows["card_present"].astype("boolean").fillna(True).astype(bool)
    return ok


class TravelState(Snapshottable):
    """Stateful form: one entity's recent positions, for the endpoint and Spark.

    - `check(...)`: the alerts a use would raise, without changing the state (the endpoint).
    - `add(...)`: remember a use (the last-use updater).
    - `update(...)`: both (Spark); a repeated event id is ignored.

    Keeps the last `max_positions` positions in event-time order (see the module docstring
    for how late events are handled) and the last `max_seen` event ids.

    >>> state = TravelState("card-1")
    >>> state.update("t1", 0, 51.5074, -0.1278)
    []
    >>> state.update("t2", 60_000, None, None)  # online: no position, never alerts
    []
    >>> [a.event_ids for a in state.update("t3", 180_000, -33.8688, 151.2093)]
    [('t1', 't3')]
    """

    __slots__ = ("entity_id", "label", "max_positions", "params", "positions", "rule", "seen")

    def __init__(
        self,
        entity_id: str,
        params: TravelParams | None = None,
        *,
        rule: str = RULE,
        label: str | None = RULE,
        max_positions: int = 8,
        max_seen: int = 64,
    ) -> None:
        self.entity_id, self.rule, self.label = entity_id, rule, label
        self.params = params or TravelParams()
        self.max_positions = max(1, max_positions)
        self.positions: list[Position] = []
        self.seen = SeenIds(max_seen)

    def last(self) -> Position | None:
        """The latest position in event time."""
        return self.positions[-1] if self.positions else None

    def check(
        self,
        event_id: str,
        event_time: int,
        lat: float | None,
        lon: float | None,
        card_present: bool | None = True,
    ) -> list[Alert]:
        """Alerts for this use against its neighbours in event time; the state is unchanged."""
        current = position(event_id, event_time, lat, lon, card_present)
        if current is None:
            return []
        alerts = []
        for neighbour in self._neighbours(current):
            alert = check_travel(
                self.entity_id, neighbour, current, self.params, self.rule, self.label
            )
            if alert is not None:
                alerts.append(alert)
        return alerts

    def add(
        self,
        event_id: str,
        event_time: int,
        lat: float | None,
        lon: float | None,
        card_present: bool | None = True,
    ) -> None:
        """Remember a use (a use without a position only marks its id as seen)."""
        self.seen.add(str(event_id))
        current = position(event_id, event_time, lat, lon, card_present)
        if current is None or any(p.event_id == current.event_id for p in self.positions):
            return
        bisect.insort(self.positions, current, key=_order)
        del self.positions[: max(0, len(self.positions) - self.max_positions)]

    def update(
        self,
        event_id: str,
        event_time: int,
        lat: float | None,
        lon: float | None,
        card_present: bool | None = True,
    ) -> list[Alert]:
        """`check` then `add`; an event id seen before returns no alerts."""
        if str(event_id) in self.seen:
            return []
        alerts = self.check(event_id, event_time, lat, lon, card_present)
        self.add(event_id, event_time, lat, lon, card_present)
        return alerts

    def _neighbours(self, current: Position) -> list[Position]:
        others = [p for p in self.positions if p.event_id != current.event_id]
        i = bisect.bisect_left(others, _order(current), key=_order)
        return others[max(0, i - 1) : i + 1]

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able snapshot (store it in Spark state, restore with `restore`)."""
        return {"positions": [list(p) for p in self.positions], "seen": self.seen.to_list()}

    def restore(self, data: Mapping[str, Any]) -> None:
        self.positions = [
            Position(str(i), int(t), float(a), float(o)) for i, t, a, o in data["positions"]
        ]
        self.seen = SeenIds(self.seen.capacity, data["seen"])


def _order(p: Position) -> tuple[int, str]:
    return p.event_time, p.event_id


def travel_step(
    entity_id: str,
    positions: list[Position],
    current: Position | None,
    params: TravelParams,
    max_positions: int = 8,
) -> list[Alert]:
    """`TravelState.update` on a plain list of positions (sorted by event time, changed in
    place), for compact state: the alerts of `current` against its neighbours in event time,
    then `current` remembered (a use without a position, None, changes nothing).

    >>> positions: list[Position] = []
    >>> travel_step("card-1", positions, Position("t1", 0, 51.5074, -0.1278), TravelParams())
    []
    >>> sydney = Position("t3", 180_000, -33.8688, 151.2093)
    >>> [a.event_ids for a in travel_step("card-1", positions, sydney, TravelParams())]
    [('t1', 't3')]
    >>> len(positions)
    2
    """
    if current is None or any(p.event_id == current.event_id for p in positions):
        return []
    i = bisect.bisect_left(positions, _order(current), key=_order)
    alerts = []
    for neighbour in positions[max(0, i - 1) : i + 1]:
        alert = check_travel(entity_id, neighbour, current, params)
        if alert is not None:
            alerts.append(alert)
    positions.insert(i, current)
    del positions[: max(0, len(positions) - max(1, max_positions))]
    return alerts
