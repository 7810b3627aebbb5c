"""`detectors.cards.travel` in Spark's engine: impossible travel as a time-bounded self-join.

Each located use of a card (card present, a valid position) is joined with the card's later
located uses (ordered by event time, then event id) at most `join_bound_ms` later: the longest
gap that could still be impossible (`fastest_s` of half the Earth's circumference, less the
skew allowance), derived from `TravelParams`. The predicate is the detector's `is_impossible`,
on Columns, with the distance by the haversine formula (`haversine_km`, `detectors.geo`'s
definition as a Column expression). The alert is `pair_alert`'s: keyed by the pair's event
ids, so a pair joined twice (a duplicate use, a replayed batch) is one alert id, which the
`AlertSink` writes once.

Differs by design from the Python forms, which judge each use against its neighbours in event
time (consecutive pairs):
- all pairs within the bound are judged, not only consecutive ones, so a card may get more
  alerts (on other pairs). It gets at least one wherever the Python forms alert: a
  consecutive impossible pair is a pair within the bound. The flagged cards agree: an
  impossible pair (a, c) with a use b between has, by the triangle inequality and the
  subadditive `fastest_s`, an impossible leg (a, b) or (b, c), up to the skew allowance
  (counted once per pair) and `min_distance_km` (a leg under it never alerts);
- the distance is the sphere's (haversine), not the ellipsoid's geodesic: within
  [`HAVERSINE_LOW`, `HAVERSINE_HIGH`] of it, so a pair within 0.7% of the threshold may be
  judged otherwise, and the evidence's distance differs by as much.
"""

from __future__ import annotations

import math

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from detectors import TravelParams
from detectors.cards.travel import RULE, fastest_s, is_impossible
from detectors.geo import EARTH_MEAN_RADIUS_KM
from pipeline.rules.alert_rows import alert, evidence_json, params_columns

#: The located uses' columns the join reads.
USE_COLUMNS = ("entity", "event_id", "event_time", "lat", "lon", "event_ts")


def haversine_km(lat1: Column, lon1: Column, lat2: Column, lon2: Column) -> Column:
    """`detectors.geo.haversine_km` as a Column expression (degrees in, km out)."""
    p1, p2 = F.radians(lat1), F.radians(lat2)
    dlat, dlon = p2 - p1, F.radians(lon2 - lon1)
    h = F.pow(F.sin(dlat / 2), 2) + F.cos(p1) * F.cos(p2) * F.pow(F.sin(dlon / 2), 2)
    return F.lit(2 * EARTH_MEAN_RADIUS_KM) * F.asin(F.least(F.lit(1.0), F.sqrt(h)))


def join_bound_ms(params: TravelParams) -> int:
    """The longest gap (ms) of a pair the rule can find impossible: the fastest time over half
    the Earth's circumference (no two points are farther apart), less the skew allowance.

    >>> join_bound_ms(TravelParams()) // 3_600_000
    20
    """
    farthest = math.pi * EARTH_MEAN_RADIUS_KM
    return max(0, math.ceil((fastest_s(farthest, params) - params.skew_allowance_s) * 1000))


def located(uses: DataFrame) -> DataFrame:
    """The uses with a valid position, card present (`detectors.cards.travel.position`)."""
    lat, lon = F.col("lat").cast("double"), F.col("lon").cast("double")
    ok = (
        lat.isNotNull()
        & lon.isNotNull()
        & ~F.isnan(lat)
        & ~F.isnan(lon)
        & (F.abs(lat) <= 90)
        & (F.abs(lon) <= 360)
        & ~F.coalesce(F.col("card_present") == F.lit(False), F.lit(False))
    )
    return uses.where(ok).select(
        "entity", "event_id", "event_time", lat.alias("lat"), lon.alias("lon"), "event_ts"
    )


def travel_pairs(uses: DataFrame, params: TravelParams) -> DataFrame:
    """Alert rows (`pipeline.rules.alert_rows.FIELDS`, key text in `alert_id`) of the
    impossible pairs of `uses` (`entity`, `event_id`, `event_time`, `lat`, `lon`,
    `card_present`, `event_ts`; watermarked on `event_ts` when streaming)."""
    points = located(uses)
    a = points.alias("a")
    b = points.alias("b")
    bound = F.expr(f"INTERVAL {join_bound_ms(params)} MILLISECONDS")
    earlier = (F.col("a.event_time") < F.col("b.event_time")) | (
        (F.col("a.event_time") == F.col("b.event_time"))
        & (F.col("a.event_id") < F.col("b.event_id"))
    )
    pairs = a.join(
        b,
        (F.col("a.entity") == F.col("b.entity"))
        & (F.col("b.event_ts") >= F.col("a.event_ts"))
        & (F.col("b.event_ts") <= F.col("a.event_ts") + bound)
        & earlier,
        "inner",
    )
    distance = haversine_km(F.col("a.lat"), F.col("a.lon"), F.col("b.lat"), F.col("b.lon"))
    gap_s = (F.col("b.event_time") - F.col("a.event_time")) / F.lit(1000.0)
    judged = pairs.select(
        F.col("a.entity").alias("entity"),
        F.col("a.event_id").alias("first_id"),
        F.col("b.event_id").alias("second_id"),
        F.col("b.event_time").alias("second_time"),
        distance.alias("distance_km"),
        gap_s.alias("gap_s"),
    ).where(is_impossible(F.col("distance_km"), F.col("gap_s"), params))
    return judged.select(travel_alert(params).alias("a")).select("a.*")


def travel_alert(params: TravelParams) -> Column:
    """`pair_alert`'s struct over a judged pair's columns."""
    distance, gap = F.col("distance_km"), F.col("gap_s")
    by_air = F.lit(params.overhead_s) + distance * F.lit(3600.0 / params.max_speed_kmh)
    fastest = (
        by_air
        if params.max_ground_speed_kmh is None
        else F.least(by_air, distance * F.lit(3600.0 / params.max_ground_speed_kmh))
    )
    evidence = evidence_json(
        [
            distance.alias("distance_km"),
            gap.alias("gap_s"),
            F.when(gap > 0, distance * 3600.0 / gap).alias("speed_kmh"),
            fastest.alias("fastest_s"),
            *params_columns(params.model_dump()),
        ]
    )
    ids = F.array(F.col("first_id"), F.col("second_id"))
    key = [F.col("first_id"), F.col("second_id")]
    return alert(RULE, RULE, F.col("entity"), F.col("second_time"), ids, evidence, key)
