"""Precision, recall, F1 and detection latency per label type, on plain DataFrames.

Definitions (the same for every path):
- An *incident* is a truth `incident_id` with a label other than `none`; its events are the
  delivered ones (a reading dropped in transit reached no detector). `support` counts incidents.
- A *detection* is one decision naming a label type (an alert, or an endpoint verdict whose
  evidence lists a fired rule), with the event ids behind it. It is a true positive when one
  of those events belongs to an incident of that label type.
- precision = true-positive detections / detections; recall = incidents with at least one
  true-positive detection / incidents; F1 their harmonic mean.
- latency = the first true-positive detection of an incident (in simulated time) minus the
  incident's earliest true time; p50 and p99 over detected incidents.
- A hard-negative alert is a detection whose events include one marked `hard_negative` and
  none of an incident of its label type.
- With `horizon_ms`, an incident still running when the run ended (its last reading, sent or
  not, within `RUNNING_MS` of the run's last reading) that started less than `horizon_ms`
  before that is *open*: the run's end may have cut it off before it could show its signature,
  so it is left out of support and recall (and counted as `open`); a detection of it still
  counts as a true positive. Incidents running for longer than the horizon are scored.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

DETECTION_COLUMNS = ("label", "event_ids", "detected_sim_ms")


def incidents(truth: pd.DataFrame) -> pd.DataFrame:
    """event_id -> (label, incident_id, true_time) for delivered events of labelled incidents."""
    delivered = truth[truth["dropped"].isna() & truth["duplicate_of"].isna()]
    labelled = delivered[(delivered["label"] != "none") & delivered["incident_id"].notna()]
    return labelled[["event_id", "label", "incident_id", "true_time"]].drop_duplicates("event_id")


RUNNING_MS = 5_000


def open_incidents(truth: pd.DataFrame, horizon_ms: float) -> set[str]:
    """Incidents still running at the run's end that started within `horizon_ms` of it.

    >>> truth = pd.DataFrame({"incident_id": ["a", "a", None, "b", "c", "c"],
    ...                       "true_time": [0, 1_000, 60_000, 59_500, 20_000, 59_000]})
    >>> sorted(open_incidents(truth, 30_000))
    ['b']
    """
    end = truth["true_time"].max()
    times = truth.dropna(subset=["incident_id"]).groupby("incident_id")["true_time"]
    first, last = times.min(), times.max()
    return set(last.index[(last >= end - RUNNING_MS) & (first > end - horizon_ms)])


def score_path(
    detections: pd.DataFrame,
    truth: pd.DataFrame,
    labels: list[str],
    horizon_ms: float | None = None,
) -> dict[str, dict[str, Any]]:
    """Per label type: precision, recall, f1, support and (when measurable) latency_ms; with
    `horizon_ms`, also `open` (see the module docstring)."""
    events = incidents(truth)
    label_of = dict(zip(events["event_id"], events["label"], strict=True))
    incident_of = dict(zip(events["event_id"], events["incident_id"], strict=True))
    started = events.groupby("incident_id")["true_time"].min()
    cut = set() if horizon_ms is None else open_incidents(truth, horizon_ms)
    scored = events[~events["incident_id"].isin(cut)]
    support = scored.groupby("label")["incident_id"].nunique()
    still_open = events[events["incident_id"].isin(cut)].groupby("label")["incident_id"].nunique()
    out: dict[str, dict[str, Any]] = {}
    for label in labels:
        mine = detections[detections["label"] == label]
        hits = [
            [incident_of[e] for e in ids if label_of.get(e) == label] for ids in mine["event_ids"]
        ]
        true_positive = sum(1 for h in hits if h)
        first: dict[str, float] = {}
        for found, at in zip(hits, mine["detected_sim_ms"], strict=True):
            for incident in found:
                if pd.notna(at):
                    first[incident] = min(first.get(incident, np.inf), at)
        detected = {i for h in hits for i in h} - cut
        n = int(support.get(label, 0))
        out[label] = _figures(true_positive, len(mine), len(detected), n)
        if horizon_ms is not None:
            out[label]["open"] = int(still_open.get(label, 0))
        latencies = [first[i] - started[i] for i in detected if i in first]
        if latencies:
            p50, p99 = np.percentile(latencies, [50, 99])
            out[label]["latency_ms"] = {"p50": round(float(p50), 1), "p99": round(float(p99), 1)}
    return out


def _figures(true_positive: int, detections: int, detected: int, support: int) -> dict[str, Any]:
    precision = true_positive / detections if detections else 0.0
    recall = detected / support if support else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "support": support,
        "detections": detections,
    }


def hard_negative_alerts(detections: pd.DataFrame, truth: pd.DataFrame) -> int:
    """Detections that touch a hard-negative event and are not true positives.

    A window rule that caught a real incident may also name a marked reading beside it (a GPS
    pair, a trend window); that is a correct alert, not one raised by the hard negative.
    """
    if "hard_negative" not in truth.columns:
        return 0
    marked = set(truth.loc[truth["hard_negative"].notna(), "event_id"])
    events = incidents(truth)
    label_of = dict(zip(events["event_id"], events["label"], strict=True))
    return sum(
        1
        for label, ids in zip(detections["label"], detections["event_ids"], strict=True)
        if marked.intersection(ids) and not any(label_of.get(e) == label for e in ids)
    )


def to_sim_ms(wall_ms: pd.Series, anchor: dict[str, Any]) -> pd.Series:
    """Wall-clock decision times on the simulated clock of a paced run (NaN when unpaced)."""
    speed = anchor.get("speed")
    if not speed:
        return pd.Series(np.nan, index=wall_ms.index)
    return anchor["sim_ms"] + (wall_ms - anchor["wall_ms"]) * speed
