"""Alert shape, ids, frames, threshold models, and the shared state helpers."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from pydantic import ValidationError

from detectors import (
    ALERT_COLUMNS,
    ALERT_SPARK_DDL,
    Alert,
    EventTimeBuffer,
    SeenIds,
    ThresholdParams,
    TravelParams,
    TrendParams,
    VelocityParams,
    alert_id_for,
    alerts_to_frame,
    frame_to_alerts,
)
from detectors.alert import MAX_EVENT_IDS, cap_ids
from detectors.frames import prepare


def _alert(**over: object) -> Alert:
    base: dict[str, object] = {
        "rule": "velocity",
        "entity_id": "card-1",
        "event_time": 1_000,
        "event_ids": ["b", "a"],
        "evidence": {"tx_count": 6, "speed": float("inf")},
        "key": ["a"],
        "label": "card_testing",
    }
    base.update(over)
    return Alert.make(**base)  # type: ignore[arg-type]


def test_alert_id_is_deterministic_and_depends_on_rule_entity_and_key() -> None:
    assert _alert().alert_id == _alert(event_time=5, evidence={}).alert_id
    assert _alert().alert_id != _alert(rule="threshold").alert_id
    assert _alert().alert_id != _alert(entity_id="card-2").alert_id
    assert _alert().alert_id != _alert(key=["b"]).alert_id
    assert alert_id_for("r", "e", ["a", "b"]) != alert_id_for("r", "e", ["ab"])
    assert len(_alert().alert_id) == 16


def test_to_dict_is_json_and_round_trips() -> None:
    alert = _alert()
    data = json.loads(alert.to_json())
    assert set(data) == set(ALERT_COLUMNS)
    assert data["evidence"] == {"tx_count": 6, "speed": None}
    assert data["event_ids"] == ["b", "a"]
    back = Alert.from_dict(data)
    assert back.alert_id == alert.alert_id and back.label == "card_testing"


def test_frame_round_trip_keeps_columns_and_order() -> None:
    alerts = [_alert(event_time=20, key=["x"]), _alert(event_time=10, label=None)]
    frame = alerts_to_frame(alerts)
    assert list(frame.columns) == list(ALERT_COLUMNS)
    assert frame["event_time"].tolist() == [10, 20]
    assert json.loads(frame["evidence"].iat[0])["tx_count"] == 6
    back = frame_to_alerts(frame)
    assert [a.alert_id for a in back] == frame["alert_id"].tolist()
    assert back[0].label is None
    empty = alerts_to_frame([])
    assert list(empty.columns) == list(ALERT_COLUMNS) and len(empty) == 0


def test_alert_frame_matches_the_spark_schema() -> None:
    import pyarrow as pa

    names = [field.split()[0] for field in ALERT_SPARK_DDL.split(", ")]
    assert names == list(ALERT_COLUMNS)
    schema = pa.schema(
        [
            ("alert_id", pa.string()),
            ("rule", pa.string()),
            ("label", pa.string()),
            ("entity_id", pa.string()),
            ("event_time", pa.int64()),
            ("event_ids", pa.list_(pa.string())),
            ("evidence", pa.string()),
        ]
    )
    for alerts in ([_alert(), _alert(label=None, key=["z"])], []):
        table = pa.Table.from_pandas(alerts_to_frame(alerts), schema=schema, preserve_index=False)
        assert table.num_rows == len(alerts)


def test_event_ids_are_capped_to_head_and_tail() -> None:
    ids = [f"e{i}" for i in range(100)]
    capped = cap_ids(ids)
    assert len(capped) == MAX_EVENT_IDS
    assert capped[0] == "e0" and capped[-1] == "e99" and "e50" not in capped
    assert cap_ids(ids[:10]) == tuple(ids[:10])


def test_thresholds_are_frozen_strict_and_range_checked() -> None:
    params = VelocityParams.model_validate({"min_count": 8})
    assert params.min_count == 8 and params.window_s == 600
    with pytest.raises(ValidationError, match="extra"):
        VelocityParams.model_validate({"min_cont": 8})
    with pytest.raises(ValidationError):
        VelocityParams(min_count=0)
    with pytest.raises(ValidationError):
        VelocityParams(min_count=2, min_small_count=3)
    with pytest.raises(ValidationError):
        TravelParams(max_speed_kmh=-1)
    with pytest.raises(ValidationError, match="above, below"):
        ThresholdParams()
    with pytest.raises(ValidationError, match="min_span_s"):
        TrendParams(rising_above=1, window_s=30, min_span_s=60)
    with pytest.raises(ValidationError):
        params.min_count = 3  # type: ignore[misc]
    assert VelocityParams.model_fields["window_s"].description


def test_prepare_sorts_deduplicates_and_maps_columns() -> None:
    raw = pd.DataFrame(
        {
            "card": ["c", "c", "c", "c"],
            "event_id": ["b", "a", "b", None],
            "event_time": [20, 10, 20, 5],
        }
    )
    rows = prepare(raw, columns={"entity_id": "card"})
    assert rows["event_id"].tolist() == ["a", "b"]
    with pytest.raises(ValueError, match="missing columns"):
        prepare(raw)


def test_seen_ids_are_bounded_and_restorable() -> None:
    seen = SeenIds(capacity=3)
    assert [seen.add(i) for i in "abca"] == [True, True, True, False]
    seen.add("d")
    assert "a" not in seen and len(seen) == 3
    assert SeenIds(3, seen.to_list()).to_list() == ["b", "c", "d"]


def test_event_time_buffer_orders_releases_and_drops_late() -> None:
    buffer = EventTimeBuffer()
    for t, e in [(30, "c"), (10, "a"), (20, "b"), (10, "a0")]:
        assert buffer.push(t, e, None)
    assert [e for _, e, _ in buffer.release(20)] == ["a", "a0", "b"]
    assert not buffer.push(15, "late", None) and buffer.late_dropped == 1
    assert buffer.push(25, "ok", None)
    restored = EventTimeBuffer()
    restored.restore(json.loads(json.dumps(buffer.snapshot())))
    assert [e for _, e, _ in restored.release(None)] == ["ok", "c"]


def test_event_time_buffer_is_bounded() -> None:
    buffer = EventTimeBuffer(max_events=2)
    for t in range(5):
        buffer.push(t, str(t), None)
    assert [e for _, e, _ in buffer.release(-1)] == ["0", "1", "2"]
    assert len(buffer) == 2
