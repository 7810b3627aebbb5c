"""Scoring definitions on hand-made truth and detections."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from streamsim.evaluate.scoring import hard_negative_alerts, score_path, to_sim_ms


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
    assert travel["precision"] == pytest.approx(2 / 3, abs=1e-4)
    assert travel["recall"] == 0.5
    assert travel["f1"] == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5), abs=1e-4)
    # incident i1 starts at 1,000 and is first detected at 3,000
    assert travel["latency_ms"] == {"p50": 2_000.0, "p99": 2_000.0}
    # d1 was dropped in transit: i4 is not an incident any detector could see
    assert scores["card_testing"]["support"] == 1
    assert scores["card_testing"]["recall"] == 1.0
    assert scores["account_takeover"] == {
        "precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0, "detections": 0,
    }  # fmt: skip


def test_wrong_label_is_not_a_hit() -> None:
    found = detections([("card_testing", ["a1"], 0.0)])
    scores = score_path(found, TRUTH, ["card_testing", "impossible_travel"])
    assert scores["card_testing"]["precision"] == 0.0
    assert scores["impossible_travel"]["recall"] == 0.0


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
