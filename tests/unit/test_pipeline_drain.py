"""`pipeline.drain` without Spark: a query is drained when its latest batch ended at the end
offsets taken on first sight of each topic, and a failed query is an error, not a wait."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

import pipeline.drain
from core.config import StackConfig
from core.errors import StreamsimError
from pipeline.drain import Ends, drain_queries, drain_settled, has_read_to_end, is_settled

STACK = StackConfig()


@dataclass
class Query:
    name: str
    ended: dict[str, dict[str, int]] | None = None  # the latest batch's end offsets
    isActive: bool = True
    failure: Exception | None = None
    batch_id: int = 0
    watermark: str | None = None  # the latest batch's, as Spark reports it

    @property
    def id(self) -> str:
        return self.name

    @property
    def lastProgress(self) -> dict[str, Any] | None:
        if self.ended is None:
            return None
        event_time = {} if self.watermark is None else {"watermark": self.watermark}
        sources = [{"endOffset": json.dumps(self.ended)}]
        return {"batchId": self.batch_id, "eventTime": event_time, "sources": sources}

    def exception(self) -> Exception | None:
        return self.failure


@pytest.fixture(autouse=True)
def topic_ends(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    asked: list[str] = []

    def ends(stack: StackConfig, topic: str) -> dict[int, int]:
        asked.append(topic)
        return {0: 10, 1: 4}

    monkeypatch.setattr(pipeline.drain, "end_offsets", ends)
    return asked


def test_a_query_is_drained_at_its_topics_end_offsets(topic_ends: list[str]) -> None:
    ends: Ends = {}
    query = Query("q", ended={"t": {"0": 10, "1": 3}})
    assert not has_read_to_end(query, STACK, ends)  # type: ignore[arg-type]
    query.ended = {"t": {"0": 10, "1": 4}}
    assert has_read_to_end(query, STACK, ends)  # type: ignore[arg-type]
    assert topic_ends == ["t"]  # the end offsets are taken once


def test_a_query_without_progress_waits_unless_it_stopped() -> None:
    assert not has_read_to_end(Query("q"), STACK, {})  # type: ignore[arg-type]
    assert has_read_to_end(Query("q", isActive=False), STACK, {})  # type: ignore[arg-type]


def test_a_failed_query_is_an_error_naming_it() -> None:
    with pytest.raises(StreamsimError, match="query alerts failed: boom"):
        drain_queries([Query("alerts", failure=RuntimeError("boom"))], STACK)  # type: ignore[list-item]


def test_a_query_that_never_reaches_the_end_times_out_by_name() -> None:
    stuck = Query("stats", ended={"t": {"0": 1, "1": 0}})
    with pytest.raises(StreamsimError, match="stats did not read to the end of input"):
        drain_queries([stuck], STACK, timeout_s=0.0)  # type: ignore[list-item]


AT_END = {"t": {"0": 10, "1": 4}}
W0, W1 = "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:15.000Z"  # 1767225600000, +15 s


def test_a_query_is_settled_once_it_ran_under_the_watermark_committed_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    committed = {0: 1_767_225_615_000, 1: 1_767_225_615_000}  # batch -> the next one's watermark
    monkeypatch.setattr(pipeline.drain, "commit_watermark", lambda q, b: committed[b])
    query = Query("stats", ended=AT_END, batch_id=0, watermark=W0)
    assert is_settled(query, STACK, {}) is False  # a batch without data will apply W1
    query.batch_id, query.watermark = 1, W1
    assert is_settled(query, STACK, {}) is True
    assert is_settled(Query("dead letters", ended=AT_END), STACK, {}) is True  # no watermark


def test_a_query_whose_checkpoint_says_nothing_is_left_to_process_all_available(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    left: list[str] = []
    monkeypatch.setattr(pipeline.drain, "commit_watermark", lambda q, b: None)
    monkeypatch.setattr(
        pipeline.drain, "process_all_available", lambda qs: left.extend(q.name for q in qs)
    )
    drain_settled([Query("stats", ended=AT_END, watermark=W0)], STACK)  # type: ignore[list-item]
    assert left == ["stats"]


def test_a_query_that_runs_no_batch_for_its_moved_watermark_is_left_to_spark(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    left: list[str] = []
    monkeypatch.setattr(pipeline.drain, "commit_watermark", lambda q, b: 1_767_225_615_000)
    monkeypatch.setattr(
        pipeline.drain, "process_all_available", lambda qs: left.extend(q.name for q in qs)
    )
    query = Query("alerts", ended=AT_END, watermark=W0)  # no timeout: no batch without data
    drain_settled([query], STACK, no_data_wait_s=0.0)  # type: ignore[list-item]
    assert left == ["alerts"]
