"""Missed unload: a container still on board at sea after its ship left the box's discharge
port. The ship's departure port events say which port each voyage left from; a box reading at
sea on that voyage with that port as its discharge port should have come off there. A box
transshipped at a hub came off (its discharge port was the hub) and does not fire.
Key: the box, the voyage and the departure event's id: stable while the voyage's readings land
(a flush in port comes in several batches), and another run of the same fleet (same boxes and
voyages, a seed's re-run) raises ids of its own, not ones the alerts sink takes as written.
"""

from __future__ import annotations

import pandas as pd

from detectors.alert import Alert, alert_id_for
from detectors.shipping.episodes import at_sea

RULE = "missed_unload"


def missed_unload(readings: pd.DataFrame, port_events: pd.DataFrame) -> list[Alert]:
    if readings.empty or port_events.empty:
        return []
    departures = port_events[port_events["event"] == "departure"]
    dep = departures[["ship_id", "voyage_id", "port", "event_id"]].rename(
        columns={"port": "left_from", "event_id": "departure_id"}
    )
    dep = dep.sort_values("departure_id", kind="stable").drop_duplicates(["ship_id", "voyage_id"])
    sea = readings[at_sea(readings)]
    joined = sea.merge(dep, on=["ship_id", "voyage_id"], how="inner")
    hit = joined[joined["discharge_port"] == joined["left_from"]]
    hit = hit.sort_values(["container_id", "voyage_id", "event_time", "event_id"], kind="stable")
    out: list[Alert] = []
    for (box, voyage), rows in hit.groupby(["container_id", "voyage_id"], sort=True):
        first = rows.iloc[0]
        out.append(
            Alert(
                rule=RULE,
                entity_id=str(box),
                event_time=int(first["event_time"]),
                event_ids=(str(first["event_id"]),),
                evidence={
                    "discharge_port": str(first["discharge_port"]),
                    "ship_id": str(first["ship_id"]),
                    "voyage_id": int(voyage),
                },
                alert_id=alert_id_for(RULE, str(box), [int(voyage), str(first["departure_id"])]),
                label=RULE,
            )
        )
    return out
