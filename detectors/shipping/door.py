"""Door tamper: a container door open while the ship is at sea (not in a port, where customs
and surveyors open boxes as a matter of course).
Key: the first event id of the open-door run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from detectors.alert import Alert, alert_id_for
from detectors.shipping.episodes import at_sea, by_entity, runs

RULE = "door_tamper"


@dataclass(frozen=True)
class DoorParams:
    max_gap_s: float = 7200.0


def door_tamper(readings: pd.DataFrame, p: DoorParams = DoorParams()) -> list[Alert]:
    out: list[Alert] = []
    for box, r in by_entity(readings, "container_id"):
        t = r["event_time"].to_numpy(np.int64)
        ids = r["event_id"].tolist()
        flag = r["door_open"].to_numpy(bool) & at_sea(r)
        for run in runs(flag, t, p.max_gap_s * 1000):
            first = int(run[0])
            out.append(
                Alert(
                    rule=RULE,
                    entity_id=box,
                    event_time=int(t[first]),
                    event_ids=(ids[first],),
                    evidence={
                        "door_open": True,
                        "at_sea": True,
                        "ship_id": str(r["ship_id"].iloc[first]),
                    },
                    alert_id=alert_id_for(RULE, box, [ids[first]]),
                    label=RULE,
                )
            )
    return out
