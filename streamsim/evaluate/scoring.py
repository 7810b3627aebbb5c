"""Precision, recall, F1 and detection latency per label type, on plain DataFrames.

Definitions (the same for every path):
- An *incident* is a truth `incident_id` with a label other than `none`; its events are the
  delivered ones (a reading dropped in transit reached no detector). `support` counts incidents.
- A *detection* is one decision naming a label type (an alert, or an endpoint verdict whose
  evidence lists a fired rule), with the event ids behind it (each distinct id counted once).
  It is a *true positive* when at least half of those ids (`MAJORITY`) are events of ONE
  incident of its label type: that incident is the one it *hits*. Ids unknown to truth count
  against it. "At least half", not "more than half": a two-event rule such as impossible
  travel names the holder's own use beside the clone's, one incident event of two. A giant
  alert naming everything, or one naming an incident event among many others, hits nothing.
- A detection whose label is not among the scored types is a false positive of no type; they
  are counted per label by `unknown_labels` (the report shows them as `unknown_label_alerts`).
- precision = true-positive detections / detections (alert level; repeated alerts on one
  incident all count). incident_precision = incidents hit / incidents alerted on, where every
  false-positive detection counts as one more incident alerted on (one that was none), so
  alerting many times on one incident cannot raise it and alerting on everything lowers it.
  Both are None (JSON null) when there was no detection of the type.
- recall = incidents with at least one true-positive detection / incidents (0.0 without
  support); f1 = the harmonic mean of incident_precision and recall (0.0 when undefined).
- latency_ms = the first true-positive detection of an incident (in simulated time) minus the
  incident's earliest true time; p50 and p99 over detected incidents.
- latency_from_detectable_ms = the same detection time minus the moment the incident became
  detectable. Truth has no marker for that moment, so it is derived from truth records: for
  each true-positive detection of the incident, the latest true time among the events it names
  (its evidence was complete then: for a cloned card, its second use, the first one far from
  the holder's last); the incident became detectable at the earliest of those.
- latency_from_upload_ms (with `arrivals`: incident -> when its data first arrived, e.g. a
  voyage's readings landing in port days late) = the same detection time minus that arrival.
- A hard-negative alert is a detection whose events include one marked `hard_negative` and
  that is not a true positive.
- With `horizon_ms`, an incident still running when the run ended (its last reading, sent or
  not, within `running_ms` of the run's last reading; default `RUNNING_MS`, for 1 Hz streams;
  a shipping logger reports every 15-60 min) that started less than `horizon_ms`
  before that is *open*: the run's end may have cut it off before it could show its signature,
  so it is left out of support and recall (and counted as `open`); a detection of it still
  counts as a true positive. Incidents running for longer than the horizon are scored.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

DETECTION_COLUMNS = ("label", "event_ids", "detected_sim_ms")
#: A detection hits an incident when at least this share of the events it names are the
#: incident's (see the module docstring for why not strictly more than half).
MAJORITY = 0.5
#: The key `unknown_labels` files a detection without any label under.
NO_LABEL = "<none>"


def incidents(truth: pd.DataFrame) -> pd.DataFrame:
    """event_id -> (label, incident_id, true_time) for delivered events of labelled incidents."""
    delivered = truth[truth["dropped"].isna() & truth["duplicate_of"].isna()]
    labelled = delivered[(delivered["label"] != "none") & delivered["incident_id"].notna()]
    return labelled[["event_id", "label", "incident_id", "true_time"]].drop_duplicates("event_id")


RUNNING_MS = 5_000


def open_incidents(
    truth: pd.DataFrame, horizon_ms: float, running_ms: float = RUNNING_MS
) -> set[str]:
    """Incidents still running at the run's end that started within `horizon_ms` of it.

    >>> truth = pd.DataFrame({"incident_id": ["a", "a", None, "b", "c", "c"],
    ...                       "true_time": [0, 1_000, 60_000, 59_500, 20_000, 59_000]})
    >>> sorted(open_incidents(truth, 30_000))
    ['b']
    """
    end = truth["true_time"].max()
    times = truth.dropna(subset=["incident_id"]).groupby("incident_id")["true_time"]
    first, last = times.min(), times.max()
    return set(last.index[(last >= end - running_ms) & (first > end - horizon_ms)])


class Judge:
    """Which incident, if any, each detection hits (see the module docstring)."""

    def __init__(self, truth: pd.DataFrame) -> None:
        events = incidents(truth)
        self.label_of = dict(zip(events["event_id"], events["label"], strict=True))
        self.incident_of = dict(zip(events["event_id"], events["incident_id"], strict=True))
        self.started = events.groupby("incident_id")["true_time"].min()
        self.events = events
        known = truth.drop_duplicates("event_id")
        self.true_time = dict(zip(known["event_id"], known["true_time"], strict=True))

    def hit(self, label: Any, event_ids: Iterable[str]) -> str | None:
        """The incident of type `label` that at least half of `event_ids` belong to, or None.

        >>> truth = pd.DataFrame({"event_id": ["a", "b", "c", "n"], "true_time": [0, 1, 2, 3],
        ...     "label": ["spike", "spike", "spike", "none"], "incident_id": ["i", "i", "j", None],
        ...     "dropped": None, "duplicate_of": None})
        >>> judge = Judge(truth)
        >>> judge.hit("spike", ["a", "b", "n"]), judge.hit("spike", ["a", "n"])
        ('i', 'i')
        >>> judge.hit("spike", ["a", "c", "n"]), judge.hit("stuck_sensor", ["a"])
        (None, None)
        """
        ids = set(event_ids)
        if not ids:
            return None
        votes = Counter(
            self.incident_of[e] for e in ids if self.label_of.get(e) == label
        ).most_common(1)
        if votes and votes[0][1] >= MAJORITY * len(ids):
            return str(votes[0][0])
        return None

    def evidence_time(self, event_ids: Iterable[str]) -> float:
        """The latest true time among the named events truth knows (NaN when none)."""
        times = [self.true_time[e] for e in event_ids if e in self.true_time]
        return float(max(times)) if times else float("nan")


def score_path(
    detections: pd.DataFrame,
    truth: pd.DataFrame,
    labels: list[str],
    horizon_ms: float | None = None,
    arrivals: pd.Series | None = None,
    running_ms: float = RUNNING_MS,
) -> dict[str, dict[str, Any]]:
    """Per label type: precision, incident_precision, recall, f1, support, detections and
    (when measurable) latency_ms and latency_from_detectable_ms; with `horizon_ms`, also
    `open`; with `arrivals`, latency_from_upload_ms (see the module docstring)."""
    judge = Judge(truth)
    events = judge.events
    cut = set() if horizon_ms is None else open_incidents(truth, horizon_ms, running_ms)
    scored = events[~events["incident_id"].isin(cut)]
    support = scored.groupby("label")["incident_id"].nunique()
    still_open = events[events["incident_id"].isin(cut)].groupby("label")["incident_id"].nunique()
    out: dict[str, dict[str, Any]] = {}
    for label in labels:
        mine = detections[detections["label"] == label]
        hits = [judge.hit(label, ids) for ids in mine["event_ids"]]
        first: dict[str, float] = {}
        detectable: dict[str, float] = {}
        for incident, ids, at in zip(hits, mine["event_ids"], mine["detected_sim_ms"], strict=True):
            if incident is None:
                continue
            ready = judge.evidence_time(ids)
            if not np.isnan(ready):
                detectable[incident] = min(detectable.get(incident, np.inf), ready)
            if pd.notna(at):
                first[incident] = min(first.get(incident, np.inf), at)
        hit = {i for i in hits if i is not None}
        false_positives = sum(1 for i in hits if i is None)
        n = int(support.get(label, 0))
        out[label] = _figures(
            len(mine) - false_positives, len(mine), len(hit), false_positives, len(hit - cut), n
        )
        if horizon_ms is not None:
            out[label]["open"] = int(still_open.get(label, 0))
        timed = [i for i in hit - cut if i in first]
        _add_latency(out[label], "latency_ms", [first[i] - judge.started[i] for i in timed])
        _add_latency(
            out[label],
            "latency_from_detectable_ms",
            [first[i] - detectable[i] for i in timed if i in detectable],
        )
        if arrivals is not None:
            landed = [first[i] - arrivals[i] for i in timed if i in arrivals.index]
            _add_latency(out[label], "latency_from_upload_ms", landed)
    return out


def _add_latency(figures: dict[str, Any], key: str, latencies: list[float]) -> None:
    if latencies:
        p50, p99 = np.percentile(latencies, [50, 99])
        figures[key] = {"p50": round(float(p50), 1), "p99": round(float(p99), 1)}


def _figures(
    true_positive: int,
    detections: int,
    incidents_hit: int,
    false_positives: int,
    detected: int,
    support: int,
) -> dict[str, Any]:
    """The figures of one type. `incidents_hit` counts open incidents too; `detected` not.

    >>> _figures(0, 0, 0, 0, 0, 3)["precision"] is None
    True
    >>> f = _figures(true_positive=9, detections=10, incidents_hit=1, false_positives=1,
    ...              detected=1, support=2)
    >>> f["precision"], f["incident_precision"], f["recall"], f["f1"]
    (0.9, 0.5, 0.5, 0.5)
    """
    precision = true_positive / detections if detections else None
    alerted_on = incidents_hit + false_positives
    incident_precision = incidents_hit / alerted_on if alerted_on else None
    recall = detected / support if support else 0.0
    both = (incident_precision or 0.0) + recall
    f1 = 2 * (incident_precision or 0.0) * recall / both if both else 0.0
    return {
        "precision": None if precision is None else round(precision, 4),
        "incident_precision": None if incident_precision is None else round(incident_precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "support": support,
        "detections": detections,
    }


def unknown_labels(detections: pd.DataFrame, labels: Iterable[str]) -> dict[str, int]:
    """Detections whose label is none of the scored types (false positives of no type), per
    label; a detection without a label is filed under `NO_LABEL`.

    >>> found = pd.DataFrame({"label": ["spike", "catch_all", None, "catch_all"],
    ...                       "event_ids": [["a"]] * 4})
    >>> unknown_labels(found, ["spike"])
    {'<none>': 1, 'catch_all': 2}
    """
    known = set(labels)
    counts = Counter(
        NO_LABEL if label is None or (isinstance(label, float) and np.isnan(label)) else str(label)
        for label in detections["label"]
        if label not in known
    )
    return dict(sorted(counts.items()))


def hard_negative_alerts(detections: pd.DataFrame, truth: pd.DataFrame) -> int:
    """Detections that touch a hard-negative event and are not true positives.

    A window rule that caught a real incident may also name a marked reading beside it (a GPS
    pair, a trend window); that is a correct alert, not one raised by the hard negative.
    """
    return sum(hard_negative_alerts_by_label(detections, truth).values())


def hard_negative_alerts_by_label(detections: pd.DataFrame, truth: pd.DataFrame) -> Counter[str]:
    """`hard_negative_alerts`, per detection label."""
    if "hard_negative" not in truth.columns or detections.empty:
        return Counter()
    marked = set(truth.loc[truth["hard_negative"].notna(), "event_id"])
    judge = Judge(truth)
    return Counter(
        str(label)
        for label, ids in zip(detections["label"], detections["event_ids"], strict=True)
        if marked.intersection(ids) and judge.hit(label, ids) is None
    )


def to_sim_ms(wall_ms: pd.Series, anchor: dict[str, Any]) -> pd.Series:
    """Wall-clock decision times on the simulated clock of a paced run (NaN when unpaced)."""
    speed = anchor.get("speed")
    if not speed:
        return pd.Series(np.nan, index=wall_ms.index)
    return anchor["sim_ms"] + (wall_ms - anchor["wall_ms"]) * speed
