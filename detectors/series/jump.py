"""GPS jump: consecutive vehicle positions further apart than the vehicle could have driven.

The same rule as `detectors.cards.travel` (one implementation), with road-vehicle thresholds: no
airport overhead, a ground-speed limit, a short minimum distance (above GPS noise) and a small
skew allowance (both positions come from the same device clock). Readings without a position
(tunnels, no fix) are skipped and never replace the last position.
Key: both event ids of the pair.
"""

from __future__ import annotations

import pandas as pd
from pydantic import Field

from detectors.cards.travel import TravelParams, TravelState, travel_alerts
from detectors.frames import Columns

RULE = "gps_jump"


class GpsJumpParams(TravelParams):
    """Thresholds of `gps_jump` (the `impossible_travel` model with vehicle defaults)."""

    max_speed_kmh: float = Field(
        300.0, gt=0, le=50_000, description="Fastest the vehicle can go, km/h."
    )
    overhead_s: float = Field(0.0, ge=0, le=86_400, description="Fixed extra time per trip.")
    max_ground_speed_kmh: float | None = Field(
        None, gt=0, le=50_000, description="Unused for vehicles (None)."
    )
    min_distance_km: float = Field(
        1.0, ge=0, le=25_000, description="Jumps shorter than this never alert (GPS noise)."
    )
    skew_allowance_s: float = Field(
        1.0, ge=0, le=86_400, description="Added to every gap (timestamp jitter)."
    )


def gps_jump_alerts(
    df: pd.DataFrame,
    params: GpsJumpParams | None = None,
    *,
    label: str | None = RULE,
    columns: Columns = None,
) -> pd.DataFrame:
    """Vectorised form over readings with `lat` and `lon` (NaN where there is no fix).

    >>> rows = pd.DataFrame({"entity_id": "v1", "event_id": list("abc"),
    ...     "event_time": [0, 1_000, 2_000], "lat": [48.0, None, 48.1], "lon": [7.0, None, 7.0]})
    >>> gps_jump_alerts(rows)["event_ids"].tolist()
    [['a', 'c']]
    """
    return travel_alerts(df, params or GpsJumpParams(), columns, rule=RULE, label=label)


class GpsJumpState(TravelState):
    """Stateful form for one vehicle: `TravelState` with the `gps_jump` rule and defaults.

    >>> state = GpsJumpState("v1")
    >>> state.update("a", 0, 48.0, 7.0), len(state.update("b", 1_000, 48.1, 7.0))
    ([], 1)
    """

    def __init__(
        self,
        entity_id: str,
        params: GpsJumpParams | None = None,
        *,
        label: str | None = RULE,
        max_positions: int = 8,
        max_seen: int = 64,
    ) -> None:
        super().__init__(
            entity_id,
            params or GpsJumpParams(),
            rule=RULE,
            label=label,
            max_positions=max_positions,
            max_seen=max_seen,
        )
