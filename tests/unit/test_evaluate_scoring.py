"""Scoring definitions on hand-made truth and detections."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from streamsim.evaluate.scoring import (
    NO_LABEL,
    hard_negative_alerts,
    score_path,
    to_sim_ms,
    unknown_labels,
)


def truth_row(
    event_id: str, label: str = "none", incident: str | None = None, **kw: object
) -> dict:
    return {
        "event_id": event_id,
        "label": label,
        "incident_id": incident,
        "true_time": kw.get("true_time", 0),
        "dropped": kw.get("dropped"),
        "duplicate_of": kw.get("duplicate_of"),
        "hard_negative": kw.get("hard_negative"),
    }


TRUTH = pd.DataFrame(
    [
        truth_row("a1", "impossible_travel", "i1", true_time=1_000),
        truth_row("a2", "impossible_travel", "i1", true_time=5_000),
        truth_row("b1", "impossible_travel", "i2", true_time=9_000),
        truth_row("c1", "card_testing", "i3", true_time=100),
        truth_row("c2", "card_testing", "i3", true_time=200, dropped="network"),
        truth_row("d1", "card_testing", "i4", true_time=0, dropped="network"),  # never delivered
        truth_row("n1", hard_negative="real_flight"),
        truth_row("n2"),
    ]
)


def detections(rows: list[tuple[str, list[str], float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["label", "event_ids", "detected_sim_ms"])


def test_precision_recall_f1_and_support() -> None:
    found = detections(
        [
            ("impossible_travel", ["n2", "a2"], 7_000.0),  # hits incident i1
            ("impossible_travel", ["a1"], 3_000.0),  # i1 again, earlier
            ("impossible_travel", ["n1", "n2"], 8_000.0),  # false positive
            ("card_testing", ["c1"], 400.0),
        ]
    )
    scores = score_path(found, TRUTH, ["impossible_travel", "card_testing", "account_takeover"])
    travel = scores["impossible_travel"]
    assert travel["support"] == 2
    assert travel["precision"] == pytest.approx(2 / 3, abs=1e-4)  # alerts: 2 of 3 hit
    assert travel["incident_precision"] == 0.5  # i1 and one false alarm
    assert travel["recall"] == 0.5
    assert travel["f1"] == 0.5  # of incident precision and recall
    # incident i1 starts at 1,000 and is first detected at 3,000, by an alert on a1 alone
    assert travel["latency_ms"] == {"p50": 2_000.0, "p99": 2_000.0}
    assert travel["latency_from_detectable_ms"] == {"p50": 2_000.0, "p99": 2_000.0}
    # d1 was dropped in transit: i4 is not an incident any detector could see
    assert scores["card_testing"]["support"] == 1
    assert scores["card_testing"]["recall"] == 1.0
    assert scores["account_takeover"] == {
        "precision": None, "incident_precision": None, "recall": 0.0, "f1": 0.0,
        "support": 0, "detections": 0,
    }  # fmt: skip


def test_wrong_label_is_not_a_hit() -> None:
    found = detections([("card_testing", ["a1"], 0.0)])
    scores = score_path(found, TRUTH, ["card_testing", "impossible_travel"])
    assert scores["card_testing"]["precision"] == 0.0
    assert scores["card_testing"]["incident_precision"] == 0.0
    assert scores["impossible_travel"]["recall"] == 0.0
    assert scores["impossible_travel"]["precision"] is None  # no detection: undefined, not 0


def test_hard_negative_alerts_counts_false_detections_touching_marked_events() -> None:
    found = detections(
        [
            ("impossible_travel", ["n1", "x"], 0.0),  # raised by the hard negative
            ("impossible_travel", ["n1", "a1"], 0.0),  # a true incident beside a marked one
            ("card_testing", ["n1", "a1"], 0.0),  # wrong label type: still a false alert
            ("card_testing", ["c1"], 0.0),
        ]
    )
    assert hard_negative_alerts(found, TRUTH) == 2


def test_unpaced_runs_have_no_latency() -> None:
    walls = pd.Series([1_000.0, 2_000.0])
    assert to_sim_ms(walls, {"wall_ms": 0, "sim_ms": 10, "speed": 2.0}).tolist() == [
        2_010.0,
        4_010.0,
    ]
    unpaced = to_sim_ms(walls, {"wall_ms": 0, "sim_ms": 10, "speed": None})
    assert all(math.isnan(v) for v in unpaced)
    found = detections([("impossible_travel", ["a1"], math.nan)])
    assert "latency_ms" not in score_path(found, TRUTH, ["impossible_travel"])["impossible_travel"]


def test_a_detection_hits_an_incident_only_when_half_its_events_are_that_incidents() -> None:
    found = detections(
        [
            ("impossible_travel", ["a1", "a2", "b1"], 0.0),  # i1 2 of 3: hit
            ("impossible_travel", ["a1", "b1", "n1"], 0.0),  # one of each: none is most
            ("impossible_travel", ["a1", "x", "y"], 0.0),  # ids unknown to truth count against
            ("impossible_travel", ["b1", "n2"], 0.0),  # a two-event rule: the clone's use and
            # the holder's own one (half): hit
            ("impossible_travel", ["a1", "a1", "a1", "n1"], 0.0),  # a repeated id counts once
        ]
    )
    travel = score_path(found, TRUTH, ["impossible_travel"])["impossible_travel"]
    assert travel["precision"] == pytest.approx(3 / 5, abs=1e-4)
    assert travel["incident_precision"] == pytest.approx(2 / 4, abs=1e-4)  # i1, i2 + 2 false
    assert travel["recall"] == 1.0


def test_latency_from_detectable_starts_at_the_evidence_not_the_incident() -> None:
    # i1: a1 at 1,000, a2 at 5,000; the only alert names a2 (and a holder's use at 0), so the
    # incident was detectable from 5,000 on
    found = detections([("impossible_travel", ["n2", "a2"], 6_500.0)])
    travel = score_path(found, TRUTH, ["impossible_travel"])["impossible_travel"]
    assert travel["latency_ms"] == {"p50": 5_500.0, "p99": 5_500.0}
    assert travel["latency_from_detectable_ms"] == {"p50": 1_500.0, "p99": 1_500.0}


def test_unknown_labels_are_false_positives_counted_per_label() -> None:
    found = detections(
        [
            ("catch_all", ["a1"], 0.0),
            ("catch_all", ["n1"], 0.0),
            (None, ["c1"], 0.0),  # type: ignore[list-item]
            ("impossible_travel", ["a1"], 0.0),
        ]
    )
    assert unknown_labels(found, ["impossible_travel", "card_testing"]) == {
        NO_LABEL: 1,
        "catch_all": 2,
    }
    assert hard_negative_alerts(found, TRUTH) == 1  # the catch-all on n1
    scores = score_path(found, TRUTH, ["impossible_travel", "card_testing"])
    assert scores["impossible_travel"]["detections"] == 1  # none of the others is a hit


# -- adversarial detectors: none of them may score well ---------------------------------------

LABELS = ["spike", "stuck_sensor"]


def fleet_truth() -> pd.DataFrame:
    """2,000 readings a second apart; 10 incidents of each type, 5 readings each, and 10
    hard negatives."""
    rows = [truth_row(f"e{i}", true_time=i * 1_000) for i in range(2_000)]
    for k in range(20):
        label = LABELS[k % 2]
        for j in range(5):
            i = 50 + k * 90 + j
            rows[i] = truth_row(f"e{i}", label, f"inc{k}", true_time=i * 1_000)
    for k in range(10):
        i = 95 + k * 180
        rows[i] = truth_row(f"e{i}", true_time=i * 1_000, hard_negative="cold_start")
    return pd.DataFrame(rows)


FLEET = fleet_truth()
EVENTS = FLEET["event_id"].tolist()


def assert_scores_low(found: pd.DataFrame) -> dict[str, dict]:
    scores = score_path(found, FLEET, LABELS)
    for label, f in scores.items():
        assert f["support"] == 10, label
        for key in ("precision", "incident_precision"):
            assert f[key] is None or f[key] <= 0.1, (label, key, f)
        assert f["f1"] <= 0.1, (label, f)
    return scores


def test_a_detector_that_is_right_scores_one() -> None:
    found = detections(
        [
            (label, [f"e{50 + k * 90 + j}" for j in range(5)], 0.0)
            for k, label in ((k, LABELS[k % 2]) for k in range(20))
        ]
    )
    for f in score_path(found, FLEET, LABELS).values():
        assert (f["precision"], f["incident_precision"], f["recall"], f["f1"]) == (1, 1, 1, 1)


def test_alerting_on_everything_scores_low() -> None:
    windows = [EVENTS[i : i + 3] for i in range(len(EVENTS) - 2)]  # every sliding window
    found = detections([(label, ids, 0.0) for label in LABELS for ids in windows])
    scores = assert_scores_low(found)
    assert all(f["recall"] == 1.0 for f in scores.values())  # it finds all, and is useless
    assert hard_negative_alerts(found, FLEET) >= 10


def test_one_giant_alert_scores_low() -> None:
    scores = assert_scores_low(detections([(label, EVENTS, 0.0) for label in LABELS]))
    assert all(f["recall"] == 0.0 and f["precision"] == 0.0 for f in scores.values())


def test_alerting_on_nothing_scores_low_and_precision_is_null() -> None:
    scores = assert_scores_low(detections([]))
    for f in scores.values():
        assert f["precision"] is None and f["incident_precision"] is None
        assert f["recall"] == 0.0 and f["f1"] == 0.0 and f["detections"] == 0


def test_one_alert_per_event_scores_low() -> None:
    found = detections([(label, [e], 0.0) for label in LABELS for e in EVENTS])
    scores = assert_scores_low(found)
    assert all(f["recall"] == 1.0 for f in scores.values())


def test_repeating_alerts_on_one_incident_does_not_raise_incident_precision() -> None:
    one = [f"e{50 + j}" for j in range(5)]  # inc0, a spike
    found = detections([("spike", one, 0.0)] * 99 + [("spike", ["e10"], 0.0)])
    spike = score_path(found, FLEET, LABELS)["spike"]
    assert spike["precision"] == 0.99  # alert level: the repeats all count
    assert spike["incident_precision"] == 0.5  # one incident, one false alarm
    assert spike["recall"] == 0.1 and spike["f1"] <= 0.2
