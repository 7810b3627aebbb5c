"""Reefer failure: the unit stops cooling. Either its draw falls to fans only (below
`max_power_kw` for `min_low_power` readings in a row), or the air stays more than `band_c` off
the setpoint for `min_off_band_s` (not alerted again where the draw already did). A defrost
cycle raises the air a few degrees for under an hour on a reduced (heater) draw, so neither
leg fires on it.
Key: the run's first event id.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from detectors.alert import Alert, Evidence, alert_id_for, cap_ids
from detectors.shipping.episodes import by_entity, runs

RULE = "reefer_failure"


@dataclass(frozen=True)
class ReeferParams:
    max_power_kw: float = 1.5  # a running unit draws 3-7.5 kW, a defrost heater over 1.6
    min_low_power: int = 2
    band_c: float = 3.0
    min_off_band_s: float = 5400.0  # longer than any defrost (20-45 min)
    max_gap_s: float = 7200.0


def reefer_failure(readings: pd.DataFrame, p: ReeferParams = ReeferParams()) -> list[Alert]:
    rows = readings[readings["temp_c"].notna()]
    out: list[Alert] = []
    for box, r in by_entity(rows, "container_id"):
        t = r["event_time"].to_numpy(np.int64)
        ids = r["event_id"].tolist()
        power = r["power_kw"].to_numpy(np.float64)
        dev = np.abs(r["temp_c"].to_numpy(np.float64) - r["setpoint_c"].to_numpy(np.float64))
        low_runs = [
            run
            for run in runs(power < p.max_power_kw, t, p.max_gap_s * 1000)
            if run.size >= p.min_low_power
        ]
        for run in low_runs:
            at = int(run[p.min_low_power - 1])
            out.append(_alert(box, ids, t, run, at, "low_power", float(power[at]), p))
        for run in runs(dev > p.band_c, t, p.max_gap_s * 1000):
            long_enough = np.flatnonzero(t[run] - t[run[0]] >= p.min_off_band_s * 1000)
            overlaps = any(lo[0] <= run[-1] and run[0] <= lo[-1] for lo in low_runs)
            if long_enough.size and not overlaps:  # one alert per failure
                at = int(run[long_enough[0]])
                out.append(_alert(box, ids, t, run, at, "off_setpoint", float(dev[at]), p))
    return out


def _alert(
    box: str,
    ids: list[str],
    t: np.ndarray,
    run: np.ndarray,
    at: int,
    why: str,
    value: float,
    p: ReeferParams,
) -> Alert:
    involved = [ids[i] for i in run[run <= at].tolist()]
    evidence: Evidence = {
        "signal": why,
        "value": round(value, 3),
        "max_power_kw": p.max_power_kw,
        "band_c": p.band_c,
        "since": int(t[run[0]]),
    }
    return Alert(
        rule=RULE,
        entity_id=box,
        event_time=int(t[at]),
        event_ids=cap_ids(involved),
        evidence=evidence,
        alert_id=alert_id_for(RULE, box, [ids[int(run[0])]]),
        label=RULE,
    )
