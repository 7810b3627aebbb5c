"""Lost overboard: a container's readings stop at sea while its ship's go on. Fires when the
box's last reading was at sea (on a ship, not in a port) and its ship's own log (`ship_log`:
not the satellite slice) has positions for `silence_s` after it. A box unloaded in port
(delivered or transshipped) last reported in that port, so it does not fire. The shock of the
last reading is evidence, not a condition.

Why not the satellite slice: at sea a box's readings are held on board like the ship's log,
and only its alarms go live. A box whose temperature or door alarm went up by satellite, with
its ship's satellite positions going on for hours after, has not fallen silent: its held
readings have not landed yet. The ship's held positions land with them, in the same flush.
Key: the box's last event id.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from detectors.alert import Alert, alert_id_for

RULE = "lost_overboard"
#: The channel of the live slice (`channel` of a position; a frame without the column is all
#: the ship's own log).
SATELLITE = "satellite"


@dataclass(frozen=True)
class OverboardParams:
    silence_s: float = 4 * 3600.0  # four dry-box logger periods


def lost_overboard(
    readings: pd.DataFrame, positions: pd.DataFrame, p: OverboardParams = OverboardParams()
) -> list[Alert]:
    if readings.empty or positions.empty:
        return []
    ordered = readings.sort_values(["container_id", "event_time", "event_id"], kind="stable")
    last = ordered.groupby("container_id", sort=True).tail(3)
    final = last.groupby("container_id", sort=True).tail(1)
    final = final[final["ship_id"].notna() & final["port"].isna()]
    ship_last = ship_log(positions).groupby("ship_id")["event_time"].max()
    out: list[Alert] = []
    for row in final.itertuples(index=False):
        seen = ship_last.get(row.ship_id)
        if seen is None or seen - row.event_time < p.silence_s * 1000:
            continue
        box = str(row.container_id)
        recent = last[last["container_id"] == box]["event_id"].tolist()
        out.append(
            Alert(
                rule=RULE,
                entity_id=box,
                event_time=int(row.event_time + p.silence_s * 1000),
                event_ids=tuple(recent),
                evidence={
                    "ship_id": str(row.ship_id),
                    "last_reading": int(row.event_time),
                    "ship_last_position": int(seen),
                    "last_shock_g": float(row.shock_g),
                    "silence_s": p.silence_s,
                },
                alert_id=alert_id_for(RULE, box, [row.event_id]),
                label=RULE,
            )
        )
    return out


def ship_log(positions: pd.DataFrame) -> pd.DataFrame:
    """The positions of the ships' own logs: those not sent live by satellite."""
    if "channel" not in positions.columns:
        return positions
    return positions[positions["channel"] != SATELLITE]
