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
from pipeline.drain import Ends, drain_queries, has_read_to_end

STACK = StackConfig()


@dataclass
class Query:
    name: str
    ended: dict[str, dict[str, int]] | None = None  # the latest batch's end offsets
    isActive: bool = True
    failure: Exception | None = None

    @property
    def lastProgress(self) -> dict[str, Any] | None:
        if self.ended is None:
            return None
        return {"sources": [{"endOffset": json.dumps(self.ended)}]}

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
