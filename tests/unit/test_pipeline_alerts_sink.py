"""AlertSink: each alert id once to Kafka and the lake, whatever replays and re-runs."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from core.config import StackConfig
from detectors import Alert, alerts_to_frame
from pipeline import alerts_sink
from pipeline.alerts_sink import (
    AlertSink,
    alert_record,
    checkpoint_query_id,
    lake_alert_ids,
    new_alerts,
    read_lake,
)

QUERY_ID = "0c6e3f5a-0000-4000-8000-000000000001"


class FakeBatch:
    """What the sink uses of a micro-batch DataFrame."""

    def __init__(self, alerts: list[Alert]) -> None:
        self.frame = alerts_to_frame(alerts)
        self.collected = 0

    def select(self, *columns: str) -> FakeBatch:
        assert list(columns) == list(self.frame.columns)
        return self

    def toPandas(self) -> pd.DataFrame:
        self.collected += 1
        return self.frame


def alert(entity: str, second: int, *ids: str) -> Alert:
    return Alert.make("velocity", entity, second * 1000, ids, {"tx_count": len(ids)}, key=ids)


def make_sink(tmp_path: Path, query_id: str = QUERY_ID) -> tuple[AlertSink, list[dict]]:
    checkpoint = tmp_path / "checkpoints" / query_id
    checkpoint.mkdir(parents=True, exist_ok=True)
    (checkpoint / "metadata").write_text(json.dumps({"id": query_id}) + "\n")
    sink = AlertSink(StackConfig(), "alerts", "cards", checkpoint, tmp_path / "lake")
    published: list[dict] = []
    sink._publish = published.extend  # type: ignore[method-assign,assignment]  # no broker
    return sink, published


A1, A2, A3 = alert("c1", 5, "t1", "t2"), alert("c2", 6, "t3"), alert("c3", 7, "t4")


def test_alert_record_shape() -> None:
    record = alert_record(A1.to_row(), "cards", 123)
    assert record == {
        "alert_id": A1.alert_id,
        "rule": "velocity",
        "label": None,
        "entity_id": "c1",
        "event_time": 5000,
        "event_ids": ["t1", "t2"],
        "evidence": {"tx_count": 2},
        "source": "pipeline",
        "job": "cards",
        "detected_at": 123,
    }


def test_new_alerts_drops_known_and_repeated_ids() -> None:
    rows = alerts_to_frame([A2, A1, A2])
    assert new_alerts(rows, {A2.alert_id})["alert_id"].tolist() == [A1.alert_id]
    assert new_alerts(rows, set())["alert_id"].tolist() == [A1.alert_id, A2.alert_id]


def test_batches_go_to_kafka_then_the_lake_once(tmp_path: Path) -> None:
    sink, published = make_sink(tmp_path)
    sink(FakeBatch([A1, A2]), 0)  # type: ignore[arg-type]
    sink(FakeBatch([]), 1)  # type: ignore[arg-type]
    sink(FakeBatch([A3]), 2)  # type: ignore[arg-type]
    assert [r["alert_id"] for r in published] == [A1.alert_id, A2.alert_id, A3.alert_id]
    lake = read_lake(tmp_path / "lake")
    assert sorted(lake["alert_id"]) == sorted(a.alert_id for a in (A1, A2, A3))
    assert sorted(set(lake["batch_id"])) == [0, 2]
    assert set(lake["query_id"]) == {QUERY_ID}
    assert json.loads(lake.loc[lake["alert_id"] == A1.alert_id, "evidence"].item()) == {
        "tx_count": 2
    }
    folder = tmp_path / "lake" / "alerts" / "cards" / QUERY_ID
    assert sorted(p.name for p in folder.iterdir()) == [
        "batch-000000000.parquet",
        "batch-000000002.parquet",
    ]
    assert sink.stats()["alerts_written"] == 3


def test_a_replayed_batch_is_consumed_but_not_written_again(tmp_path: Path) -> None:
    sink, _ = make_sink(tmp_path)
    sink(FakeBatch([A1]), 4)  # type: ignore[arg-type]
    restarted, republished = make_sink(tmp_path)  # same checkpoint: same query id
    replay = FakeBatch([A1])
    restarted(replay, 4)  # type: ignore[arg-type]
    assert replay.collected == 1  # Spark needs the whole batch run, or state never commits
    assert republished == []
    assert restarted.stats()["batches_replayed"] == 1
    assert len(read_lake(tmp_path / "lake")) == 1


def test_a_fresh_checkpoint_rerun_adds_nothing_already_in_the_lake(tmp_path: Path) -> None:
    first, _ = make_sink(tmp_path)
    first(FakeBatch([A1, A2]), 0)  # type: ignore[arg-type]
    rerun, published = make_sink(tmp_path, "0c6e3f5a-0000-4000-8000-000000000002")
    rerun(FakeBatch([A2]), 0)  # type: ignore[arg-type]
    rerun(FakeBatch([A1, A3]), 1)  # type: ignore[arg-type]
    assert [r["alert_id"] for r in published] == [A3.alert_id]
    assert rerun.seen_ids == {A1.alert_id, A2.alert_id, A3.alert_id}
    assert rerun.stats()["alerts_known"] == 2
    lake = read_lake(tmp_path / "lake")
    assert lake["alert_id"].is_unique and len(lake) == 3


def test_a_failed_publish_writes_no_lake_file(tmp_path: Path) -> None:
    sink, _ = make_sink(tmp_path)

    def fail(records: Any) -> None:
        raise RuntimeError("broker down")

    sink._publish = fail  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        sink(FakeBatch([A1]), 0)  # type: ignore[arg-type]
    assert lake_alert_ids(tmp_path / "lake") == set()  # so the replay publishes it again


def block(path: Path) -> Path:
    """Make `path` unwritable even for root: the folder moves aside, a file takes its name."""
    aside = path.with_name(path.name + ".aside")
    path.rename(aside)
    path.write_text("in the way")
    return aside


def test_an_unwritable_lake_holds_the_batch_says_so_and_writes_once_it_clears(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(alerts_sink, "LAKE_RETRY_S", 0.01)
    sink, published = make_sink(tmp_path)
    sink(FakeBatch([A1]), 0)  # type: ignore[arg-type]
    lake = tmp_path / "lake"
    aside = block(lake)

    def clear() -> None:
        lake.unlink()
        aside.rename(lake)

    timer = threading.Timer(0.2, clear)  # while the batch below retries
    timer.start()
    sink(FakeBatch([A2]), 1)  # type: ignore[arg-type]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    folder = lake / "alerts" / "cards" / QUERY_ID
    assert err[0].startswith(f"cards: alerts lake unwritable: {folder}: ENOTDIR")
    assert "batch 1 holds its 1 alerts" in err[0]
    assert err[1].startswith("cards: alerts lake writable again after")
    assert err[1].endswith(f"batch 1 written to {folder / 'batch-000000001.parquet'}")
    assert [r["alert_id"] for r in published] == [A1.alert_id, A2.alert_id]  # once each
    assert sorted(read_lake(lake)["alert_id"]) == sorted([A1.alert_id, A2.alert_id])


def test_a_lake_unwritable_past_the_wait_fails_the_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(alerts_sink, "LAKE_RETRY_S", 0.01)
    monkeypatch.setattr(alerts_sink, "LAKE_WAIT_S", 0.05)
    sink, _ = make_sink(tmp_path)
    (tmp_path / "lake").mkdir()
    block(tmp_path / "lake")
    with pytest.raises(OSError, match=r"alerts lake unwritable for 0\.05s"):
        sink(FakeBatch([A1]), 0)  # type: ignore[arg-type]


def test_lake_helpers_on_an_empty_lake(tmp_path: Path) -> None:
    assert lake_alert_ids(tmp_path / "nothing") == set()
    assert read_lake(tmp_path / "nothing").empty
    checkpoint = tmp_path / "cp"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text('{"id":"q-1"}\n')
    assert checkpoint_query_id(checkpoint) == "q-1"
