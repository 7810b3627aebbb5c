"""A foreign endpoint's verdicts, as the simulator recorded them in POS mode
(`core.contracts.verdicts`, on `cards.verdicts`), scored as our endpoint's decisions are.

- A verdict whose body named alerts (`evidence.alerts`: `label`, `event_ids`, as our endpoint
  writes) gives those alerts as detections, exactly as a `cards.activity` record does.
- Otherwise a `decline` (`FLAGGED`) is one detection naming the transaction alone. The
  endpoint named no fraud type, so the detection takes the type of the incident the
  transaction belongs to in truth (*attributed*): per type, recall and latency are measured,
  while precision is not (an attributed detection cannot miss its own type), so the type's
  precision, incident precision and F1 are null; a decline of a genuine transaction is a
  false positive of no type (`unknown_label_alerts`, under `<none>`). `any_fraud` scores every
  type as one: precision there is what share of the declines were fraud.
- A request that ended in a timeout, a 5xx, a 4xx or an error has no decision: it is counted
  per outcome (`verdicts.outcomes`), never as an approval, and the fraud transactions among
  them are counted (`fraud_unanswered`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from core.contracts import verdicts
from streamsim.evaluate.scoring import incidents, score_path

#: The decisions that flag a transaction as fraud.
FLAGGED = ("decline",)
#: Every fraud type as one, in `summary`.
ANY = "any_fraud"


def latest(records: Iterable[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    """The run's verdicts (transaction ids of `prefix`), the last of each transaction id.

    >>> latest([{"transaction_id": "a1", "n": 1}, {"transaction_id": "b1"},
    ...         {"transaction_id": "a1", "n": 2}], "a")
    [{'transaction_id': 'a1', 'n': 2}]
    """
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        tx = r.get("transaction_id")
        if isinstance(tx, str) and tx.startswith(prefix):
            out[tx] = r
    return list(out.values())


def detection_rows(found: list[dict[str, Any]], truth: pd.DataFrame) -> list[dict[str, Any]]:
    """One row per named alert, or per decline (attributed: see the module docstring);
    `at` is when the request ended (epoch ms)."""
    label_of = _labels(truth)
    rows = []
    for v in found:
        if v.get("outcome") != verdicts.OK:
            continue
        alerts = v.get("alerts") or []
        if alerts:
            rows += [
                {
                    "label": a.get("label"),
                    "event_ids": a.get("event_ids") or [v["transaction_id"]],
                    "at": v.get("answered_at"),
                }
                for a in alerts
                if isinstance(a, dict)
            ]
        elif v.get("decision") in FLAGGED:
            tx = v["transaction_id"]
            rows.append({"label": label_of.get(tx), "event_ids": [tx], "at": v.get("answered_at")})
    return rows


def attributed(found: list[dict[str, Any]]) -> bool:
    """Whether no verdict named alerts: types are attributed from truth."""
    return not any(v.get("outcome") == verdicts.OK and v.get("alerts") for v in found)


def blank_precision(figures: dict[str, dict[str, Any]]) -> None:
    """Attributed types: precision, incident precision and F1 are not measured (null)."""
    for f in figures.values():
        f.update(precision=None, incident_precision=None, f1=None, attributed=True)


def summary(
    found: list[dict[str, Any]], detections: pd.DataFrame, truth: pd.DataFrame, source: str
) -> dict[str, Any]:
    """The report's `verdicts` object: requests per outcome and decision, latency from the
    intended send time, fraud transactions left unanswered, and `any_fraud`'s figures."""
    outcomes = Counter(str(v.get("outcome")) for v in found)
    decisions = Counter(str(v.get("decision")) for v in found if v.get("outcome") == verdicts.OK)
    fraud = _labels(truth)
    unanswered = Counter(
        str(v.get("outcome"))
        for v in found
        if v.get("outcome") != verdicts.OK and v.get("transaction_id") in fraud
    )
    latency = [float(v["latency_ms"]) for v in found if v.get("latency_ms") is not None]
    out: dict[str, Any] = {
        "source": source,
        "requests": len(found),
        "outcomes": {k: outcomes.get(k, 0) for k in verdicts.OUTCOMES},
        "decisions": dict(sorted(decisions.items())),
        "fraud_unanswered": dict(sorted(unanswered.items())),
        "attributed": attributed(found),
    }
    if latency:
        p50, p99 = np.percentile(latency, [50, 99])
        out["latency_ms"] = {"p50": round(float(p50), 1), "p99": round(float(p99), 1)}
    one = truth.copy()
    one["label"] = one["label"].where(one["label"] == "none", ANY)
    merged = detections.copy()
    merged["label"] = ANY
    out[ANY] = score_path(merged, one, [ANY])[ANY]
    return out


def _labels(truth: pd.DataFrame) -> dict[str, str]:
    """event id -> label type, for the delivered events of labelled incidents."""
    events = incidents(truth)
    return dict(zip(events["event_id"], events["label"], strict=True))
