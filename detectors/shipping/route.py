"""Route deviation: a ship under way at sea that loiters, below `max_sog_kn` for
`min_duration_s`, away from any berth. A weather detour takes the ship off the lane too, but
at service speed on its way to the next port, so it does not fire.
Key: the run's first event id.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from detectors.alert import Alert, alert_id_for, cap_ids
from detectors.shipping.episodes import by_entity, runs

RULE = "route_deviation"


@dataclass(frozen=True)
class RouteParams:
    max_sog_kn: float = 3.0  # a ship in service makes 14-22 kn
    min_duration_s: float = 3600.0
    max_gap_s: float = 6 * 3600.0


def route_deviation(positions: pd.DataFrame, p: RouteParams = RouteParams()) -> list[Alert]:
    out: list[Alert] = []
    for ship, r in by_entity(positions, "ship_id"):
        t = r["event_time"].to_numpy(np.int64)
        ids = r["event_id"].tolist()
        flag = (r["nav_status"] == "under_way").to_numpy() & (
            r["sog_kn"].to_numpy(np.float64) < p.max_sog_kn
        )
        for run in runs(flag, t, p.max_gap_s * 1000):
            ok = np.flatnonzero(t[run] - t[run[0]] >= p.min_duration_s * 1000)
            if not ok.size:
                continue
            at = int(run[ok[0]])
            out.append(
                Alert(
                    rule=RULE,
                    entity_id=ship,
                    event_time=int(t[at]),
                    event_ids=cap_ids([ids[i] for i in run[run <= at].tolist()]),
                    evidence={
                        "max_sog_kn": p.max_sog_kn,
                        "sog_kn": float(r["sog_kn"].iloc[at]),
                        "lat": float(r["lat"].iloc[at]),
                        "lon": float(r["lon"].iloc[at]),
                        "since": int(t[run[0]]),
                    },
                    alert_id=alert_id_for(RULE, ship, [ids[int(run[0])]]),
                    label=RULE,
                )
            )
    return out
