"""A foreign job's alerts scored from a JSON-lines file with 5% malformed records: every record
is scored or counted with its reason, and the scores are what the existing scoring gives the
well-formed alerts of the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from core.contracts import labels
from streamsim.cli.evaluate import human
from streamsim.evaluate.foreign import file_values
from streamsim.evaluate.report import FOREIGN, SCENARIOS, foreign_report
from streamsim.evaluate.scoring import hard_negative_alerts_by_label, score_path, to_sim_ms

PREFIX = "sf-t1-"
ANCHOR = {"sim_ms": 0, "wall_ms": 1_000_000, "speed": 60.0}
RUN = {"id_prefix": PREFIX, "anchor": ANCHOR, "events": 0}
TYPES = labels.SENSOR_FAULTS
INCIDENTS = 45
#: Incidents no alert hits: 0, 9, 18, 27, 36.
MISSED = {i for i in range(INCIDENTS) if i % 9 == 0}


def eid(n: int) -> str:
    return f"{PREFIX}{n:06d}"


def truth_frame() -> pd.DataFrame:
    """45 incidents of 4 readings (15 of each sensor fault) an hour apart in simulated time,
    and 400 normal readings to the run's end, every 20th a hard negative."""
    rows: list[dict[str, Any]] = []
    for i in range(INCIDENTS):
        for k in range(4):
            rows.append(
                {
                    "event_id": eid(i * 4 + k),
                    "label": TYPES[i % 3],
                    "incident_id": f"inc-{i}",
                    "true_time": i * 60_000 + k * 5_000,
                    "hard_negative": None,
                }
            )
    for n in range(400):
        rows.append(
            {
                "event_id": eid(1_000 + n),
                "label": "none",
                "incident_id": None,
                "true_time": n * 9_000,
                "hard_negative": "warm_day" if n % 20 == 0 else None,
            }
        )
    frame = pd.DataFrame(rows)
    frame["dropped"], frame["duplicate_of"] = None, None
    return frame


def alert(n: int, label: str, ids: list[str], sim_ms: float | None, **kw: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "alert_id": f"a-{n}",
        "rule": "naive",
        "label": label,
        "entity_id": f"sensor-{n % 7}",
        "event_time": 1_767_225_600_000 + n,
        "event_ids": ids,
    }
    if sim_ms is not None:  # the wall clock of a detection at sim_ms
        wall = ANCHOR["wall_ms"] + (sim_ms - ANCHOR["sim_ms"]) / ANCHOR["speed"]
        record["detected_at"] = round(wall)  # epoch ms: an integer
    return record | kw


def well_formed() -> list[dict[str, Any]]:
    """185 alerts of the run: 100 true positives on 40 incidents (1-4 each), 60 on normal
    readings (12 naming a hard negative), 15 with another type's label on incident readings,
    10 naming one incident reading among three normal ones; some without the optional
    `alert_id` and `detected_at`."""
    out: list[dict[str, Any]] = []
    for i in range(INCIDENTS):
        if i in MISSED:
            continue
        for r in range(1 + i % 4):
            ids = [eid(i * 4 + k) for k in range(3)] + [eid(1_001 + r)]
            out.append(alert(len(out), TYPES[i % 3], ids, i * 60_000 + 12_000 + r * 30_000))
    for n in range(60):
        normal = 1_000 + (n * 20 if n < 12 else n * 5 + 101)  # the first 12: hard negatives
        out.append(alert(len(out), TYPES[n % 3], [eid(normal), eid(normal + 1)], n * 50_000.0))
    for n in range(15):
        i = n * 3  # a stuck_sensor incident, alerted as a spike
        out.append(alert(len(out), "spike", [eid(i * 4), eid(i * 4 + 1)], i * 60_000 + 20_000))
    for n in range(10):
        ids = [eid(n * 4 + 4), eid(1_201 + n), eid(1_241 + n), eid(1_301 + n)]
        out.append(alert(len(out), TYPES[(n + 1) % 3], ids, None))
    for a in out[::9]:  # optional fields left out
        del a["alert_id"]
    return out


#: 10 records of 200 (5%) that break the contract, each naming the run's events.
MALFORMED = [
    '{"label": "spike", "entity_id": "s1", "event_time": 1, "event_ids": ["' + eid(4),
    "spike s1 " + eid(4),
    json.dumps(alert(900, "spike", [eid(4)], 0.0)) + "}",
    json.dumps([alert(901, "spike", [eid(4)], 0.0)]),
    json.dumps({k: v for k, v in alert(902, "spike", [eid(4)], 0.0).items() if k != "event_ids"}),
    json.dumps(alert(903, "spike", [eid(4)], 0.0) | {"label": None}),
    json.dumps(alert(904, "spike", [eid(4)], 0.0, event_time="2026-01-01T00:00:00Z")),
    json.dumps(alert(905, "spike", [eid(4)], 0.0, event_ids=[4, 5])),
    json.dumps(alert(906, "spike", [eid(4)], 0.0, detected_at="now")),
    json.dumps(alert(907, "catch_all", [eid(4)], 0.0)),
]
#: 5 well-formed records that are not scored: two of another run, one detected before the
#: run started, two replays of an alert id.
NOT_THIS_RUN = [
    alert(950, "spike", ["sf-other-000004", "sf-other-000005"], 0.0),
    alert(951, "spike", ["vehicle-000004"], 0.0),
    alert(952, "spike", [eid(4), eid(5)], 0.0, detected_at=ANCHOR["wall_ms"] - 1),
]


def write_file(path: Path) -> list[dict[str, Any]]:
    """The alerts file, shuffled deterministically, with blank lines (not records); returns
    the alerts that should be scored."""
    good = well_formed()
    replays = [dict(good[1]), dict(good[2])]
    lines = [json.dumps(a) for a in [*good, *NOT_THIS_RUN, *replays]] + MALFORMED
    order = sorted(range(len(lines)), key=lambda n: (n * 7_919) % len(lines))
    path.write_text("\n".join(lines[n] for n in order) + "\n\n")
    assert len(lines) == 200
    return good


def expected_detections(alerts: list[dict[str, Any]]) -> pd.DataFrame:
    at = pd.Series([a.get("detected_at") for a in alerts], dtype="float64")
    return pd.DataFrame(
        {
            "label": [a["label"] for a in alerts],
            "event_ids": [a["event_ids"] for a in alerts],
            "detected_sim_ms": to_sim_ms(at, ANCHOR),
        }
    )


def test_a_file_with_malformed_records_is_scored_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "alerts.jsonl"
    good = write_file(path)
    assert len(good) == 185
    truth = truth_frame()

    report = foreign_report("sensors", RUN, truth, file_values(path), f"file {path}")

    assert report["foreign"] == {
        "source": f"file {path}",
        "read": 200,
        "scored": 185,
        "rejected": 10,
        "rejected_by_reason": {
            "bad_json": 3,
            "missing_field:event_ids": 1,
            "missing_field:label": 1,
            "not_an_object": 1,
            "unknown_label": 1,
            "wrong_type:detected_at": 1,
            "wrong_type:event_ids": 1,
            "wrong_type:event_time": 1,
        },
        "other_runs": 3,
        "repeated_alert_ids": 2,
    }
    # the existing scoring, on the run's well-formed alerts read straight from the list
    expected = expected_detections(good)
    spec = SCENARIOS["sensors"]
    scores = score_path(
        expected, truth, spec["labels"], spec["horizon_ms"], None, spec["running_ms"]
    )
    touched = hard_negative_alerts_by_label(expected, truth)
    assert set(report["paths"]) == {FOREIGN}
    for label in TYPES:
        figures = dict(report["paths"][FOREIGN][label])
        assert figures.pop("hard_negative_alerts") == touched[label]
        assert figures == scores[label], label
    # and what those figures are, by construction of the alerts
    assert sum(touched.values()) == report["hard_negative_alerts"] == 12
    stuck, spike = report["paths"][FOREIGN]["stuck_sensor"], report["paths"][FOREIGN]["spike"]
    assert stuck["support"] == 15 and stuck["recall"] == round(10 / 15, 4)  # 5 missed
    assert 0.0 < stuck["precision"] < 1.0 and 0.0 < spike["incident_precision"] < 1.0
    assert stuck["latency_ms"]["p50"] == 12_000.0  # the first alert, 12 s after the start
    assert report["unknown_label_alerts"] == {FOREIGN: {}}

    text = human(report)
    assert "200 records, 185 scored" in text and "10 rejected" in text
    assert "missing_field:event_ids 1" in text and "late dropped" not in text
