"""The read side for the control panel: ring buffers, rates, parsing, and the feed routes
(with feeds filled by hand: no broker)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from api.main import create_app
from api.panel.models.feeds import (
    ActivityFeed,
    AlertFeed,
    Evaluation,
    JobProgress,
    PipelineView,
    Rates,
)
from core.config import StackConfig
from live.consumers.feeds import Feeds
from live.views.feeds import (
    PipelineProgress,
    RateTracker,
    RingBuffer,
    activity_row,
    alert_row,
    job_summaries,
    parse_watermark,
    progress_row,
)

PAN = "4111111111111111"


def activity(txid: str, decided_at: int, decision: str = "approve", **more: object) -> dict:
    return {
        "schema": "cards.activity/1",
        "transaction_id": txid,
        "card_token": "tok_" + "a" * 32,
        "card_last4": "1111",
        "event_time": decided_at - 5,
        "decided_at": decided_at,
        "amount": 10.0,
        "currency": "EUR",
        "merchant_id": "m-1",
        "channel": "card_present",
        "country": "FR",
        "lat": 48.85,
        "lon": 2.35,
        "decision": decision,
        "score": 0.9 if decision == "decline" else 0.0,
        "reasons": ["impossible_travel"] if decision == "decline" else [],
        "evidence": {"travel": {"speed_kmh": 9000.0}},
        **more,
    }


def alert(alert_id: str, detected_at: int) -> dict:
    return {
        "alert_id": alert_id,
        "rule": "velocity",
        "label": "card_testing",
        "entity_id": "tok_" + "b" * 32,
        "event_time": detected_at - 100,
        "event_ids": ["t1", "t2"],
        "evidence": orjson.dumps({"tx_count": 9, "min_count": 5}).decode(),
        "source": "pipeline",
        "job": "cards",
        "detected_at": detected_at,
    }


def progress(query: str, batch_id: int, at: int, dropped: int = 0, **more: Any) -> dict:
    return {
        "schema": "pipeline.progress/1",
        "job": "cards",
        "mode": "microbatch",
        "query": query,
        "batch_id": batch_id,
        "input_rows": 100,
        "input_rows_per_s": 50.0,
        "processed_rows_per_s": 200.0,
        "watermark": "2026-01-01T00:10:00.000Z",
        "dropped_by_watermark": dropped,
        "duration_ms": 120,
        "at": at,
        **more,
    }


# -- pure parts ------------------------------------------------------------------------------


def test_ring_buffer_is_bounded_newest_first_and_deduplicated() -> None:
    buffer = RingBuffer(3, key="decided_at", id_key="transaction_id")
    for i in range(5):
        buffer.append({"transaction_id": f"t{i}", "decided_at": 100 + i})
    assert len(buffer) == 3 and buffer.seen == 5
    assert [r["transaction_id"] for r in buffer.recent(10)] == ["t4", "t3", "t2"]
    assert [r["transaction_id"] for r in buffer.recent(2)] == ["t4", "t3"]
    buffer.append({"transaction_id": "t3", "decided_at": 103, "again": True})  # a replay
    rows = buffer.recent(10)
    assert [r["transaction_id"] for r in rows] == ["t4", "t3"]  # t2 fell out, t3 shows once
    assert rows[1]["again"] is True
    assert buffer.recent(0) == []


def test_raw_records_are_parsed_only_when_read_and_once() -> None:
    parsed: list[bytes] = []

    def parse(value: bytes) -> dict | None:
        parsed.append(value)
        record = orjson.loads(value)
        return record if "transaction_id" in record else None

    buffer = RingBuffer(3, key="decided_at", id_key="transaction_id", parse=parse)
    for i in range(6):
        buffer.append_raw(orjson.dumps({"transaction_id": f"t{i}", "decided_at": 100 + i}))
    buffer.append_raw(b'{"not": "a decision"}')
    assert parsed == [] and len(buffer) == 3 and buffer.seen == 7
    assert [r["transaction_id"] for r in buffer.recent(10)] == ["t5", "t4"]
    assert len(parsed) == 3  # the newest three only (one not a decision)
    assert [r["transaction_id"] for r in buffer.recent(1)] == ["t5"]
    assert len(parsed) == 3  # parsed once
    buffer.append({"transaction_id": "t9", "decided_at": 109})  # parsed rows mix in
    assert [r["transaction_id"] for r in buffer.recent(10)] == ["t9", "t5"]
    with pytest.raises(TypeError):
        RingBuffer(3, key="k", id_key="i").append_raw(b"{}")


def test_rates_from_end_offset_deltas() -> None:
    rates = RateTracker(history=3)
    assert rates.rates() == {} and rates.history() == [] and rates.sampled_at() is None
    rates.add(10.0, {"a": 100, "b": 5}, wall_ms=1000)
    assert rates.rates() == {}  # one sample: no rate yet
    rates.add(12.0, {"a": 300, "b": 5, "new": 7}, wall_ms=3000)
    assert rates.rates() == {"a": 100.0, "b": 0.0}  # `new` needs two samples
    rates.add(13.0, {"a": 10, "b": 6, "new": 17}, wall_ms=4000)  # `a` was recreated
    assert rates.rates() == {"a": 0.0, "b": 1.0, "new": 10.0}
    assert rates.ends() == {"a": 10, "b": 6, "new": 17}
    assert rates.sampled_at() == 4000
    rates.add(13.0, {"a": 20}, wall_ms=4000)  # no time passed: no rate, not a division by 0
    assert rates.rates() == {}
    history = rates.history()
    assert len(history) == 3  # bounded: history + 1 samples kept
    assert history[0] == {"at": 3000, "rates": {"a": 100.0, "b": 0.0}}


def test_parsing_projects_and_rejects() -> None:
    row = activity_row(activity("t1", 1000, card_number=PAN, pan=PAN))
    assert row is not None and "card_number" not in row and "pan" not in row
    assert PAN not in orjson.dumps(row).decode()
    assert activity_row({"card_token": "tok_x", "card_last4": PAN}) is None
    assert activity_row([1, 2]) is None
    parsed = alert_row(alert("a1", 5))
    assert parsed is not None and parsed["evidence"] == {"tx_count": 9, "min_count": 5}
    assert alert_row({**alert("a2", 5), "evidence": "{nope"})["evidence"] == {"raw": "{nope"}  # type: ignore[index]
    assert alert_row({"rule": "x"}) is None
    assert progress_row(progress("q", 1, 5)) is not None
    assert progress_row({**progress("q", 1, 5), "schema": "other/1"}) is None
    assert parse_watermark("2026-01-01T00:10:00.000Z") == 1_767_226_200_000
    assert parse_watermark(None) is None and parse_watermark("soon") is None


def test_pipeline_progress_keeps_the_latest_per_query_and_totals() -> None:
    view = PipelineProgress()
    view.add(progress_row(progress("counts", 1, 1_767_226_260_000, dropped=2)))  # type: ignore[arg-type]
    view.add(progress_row(progress("counts", 3, 1_767_226_270_000, dropped=1)))  # type: ignore[arg-type]
    view.add(progress_row(progress("counts", 2, 1_767_226_265_000)))  # type: ignore[arg-type]
    view.add(progress_row(progress("alerts", 1, 1_767_226_270_000)))  # type: ignore[arg-type]
    queries = {q["query"]: q for q in view.queries(now_ms=1_767_226_275_000)}
    counts = queries["counts"]
    assert counts["batch_id"] == 3  # the newest report, whatever order they came in
    assert counts["dropped_by_watermark_seen"] == 3 and counts["batches_seen"] == 3
    assert counts["input_rows_seen"] == 300
    assert counts["watermark_ms"] == 1_767_226_200_000
    assert counts["watermark_delay_s"] == 70.0 and counts["report_age_s"] == 5.0
    # Reports from before newest_event_ms and offsets_behind: nothing to tell.
    assert counts["watermark_behind_newest_s"] is None and counts["offsets_behind"] is None
    assert list(queries) == ["alerts", "counts"]


def test_lag_on_the_streams_own_clock_and_in_records() -> None:
    """A simulated run of past dates: the watermark is days behind the wall clock, but only
    seconds behind the newest reading, and the job is some records behind its topic's end."""
    view = PipelineProgress()
    watermark_ms = 1_767_226_200_000  # 2026-01-01T00:10:00Z, the reports' watermark
    wall_ms = watermark_ms + 327 * 86_400_000
    for query, newest_ms, behind in (
        ("alerts", watermark_ms + 45_500, 120),
        ("stats", watermark_ms + 30_000, 800),
        ("counts", None, None),  # no event time or no latest offset in its progress
        ("odd", "soon", "many"),  # a malformed report: no figure, not a failed page
    ):
        row = progress_row(
            progress(
                query,
                1,
                wall_ms,
                job="vehicles",
                newest_event_ms=newest_ms,
                offsets_behind=behind,
            )
        )
        view.add(row)  # type: ignore[arg-type]
    queries = {q["query"]: q for q in view.queries(now_ms=wall_ms)}
    assert queries["alerts"]["watermark_behind_newest_s"] == 45.5
    assert queries["alerts"]["watermark_delay_s"] == 327 * 86_400.0  # the wall-clock figure
    assert queries["stats"]["offsets_behind"] == 800
    assert queries["counts"]["watermark_behind_newest_s"] is None
    assert queries["counts"]["offsets_behind"] is None
    assert queries["odd"]["watermark_behind_newest_s"] is None
    assert queries["odd"]["offsets_behind"] is None
    (job,) = job_summaries(list(queries.values()))
    assert job["watermark_behind_newest_s"] == 45.5 and job["offsets_behind"] == 800
    JobProgress.model_validate(job)
    none = job_summaries([queries["counts"]])[0]
    assert none["watermark_behind_newest_s"] is None and none["offsets_behind"] is None


def test_late_events_are_counted_once_per_job() -> None:
    view = PipelineProgress()
    for query, batch, dropped, late in (
        ("alerts", 1, 6, 3),
        ("alerts", 2, 4, 2),
        ("stats", 1, 5, 5),
    ):
        report = progress(query, batch, 1_767_226_260_000 + batch, dropped=dropped)
        row = progress_row({**report, "late_events": late, "job": "vehicles"})
        view.add(row)  # type: ignore[arg-type]
    old = progress_row({**progress("counts", 1, 1_767_226_260_000, dropped=4), "job": "old"})
    view.add(old)  # type: ignore[arg-type]  # a report from before late_events: the operators' sum
    queries = {q["query"]: q for q in view.queries(now_ms=1_767_226_275_000)}
    assert queries["alerts"]["late_events_seen"] == 5 and queries["alerts"]["late_events"] == 2
    assert queries["alerts"]["dropped_by_watermark_seen"] == 10
    assert queries["counts"]["late_events_seen"] == 4
    jobs = {j["job"]: j for j in job_summaries(list(queries.values()))}
    vehicle = jobs["vehicles"]
    assert vehicle["late_events_seen"] == 5  # the most of one query: not 5 + 5
    assert vehicle["queries"] == 2 and vehicle["modes"] == ["microbatch"]
    assert vehicle["processed_rows_per_s"] == 400.0 and vehicle["watermark_delay_s"] == 60.002
    assert jobs["old"]["late_events_seen"] == 4


# -- routes ----------------------------------------------------------------------------------


class HandFed(Feeds):
    """Feeds whose threads never start: the tests fill them by hand."""

    def start(self) -> None:
        pass


@pytest.fixture
def client(tmp_path: Path) -> Iterator[tuple[TestClient, Feeds, Path]]:
    stack = StackConfig.model_validate({"dirs": {"data": str(tmp_path)}})
    feeds = HandFed(stack, "cards.activity-unit")
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", "t"),
        publisher=MemoryPublisher(),
    )
    evaluations = tmp_path / "evaluations"
    app = create_app(service, feed=feeds, evaluations_dir=evaluations)
    with TestClient(app) as test_client:
        yield test_client, feeds, evaluations


def test_feed_routes(client: tuple[TestClient, Feeds, Path]) -> None:
    http, feeds, _ = client
    feeds._on_message("cards.activity-unit", orjson.dumps(activity("t1", 1000, card_number=PAN)))
    feeds._on_message("cards.activity-unit", orjson.dumps(activity("t2", 2000, "decline")))
    feeds._on_message("cards.activity-unit", orjson.dumps({"not": "a decision"}))
    feeds._on_message("cards.activity-unit", b"{not json")
    feeds._on_alert(alert("a1", 3000))
    feeds._on_progress(
        progress("counts", 4, 5000, dropped=7, newest_event_ms=1_767_226_212_000, offsets_behind=9)
    )
    feeds.rates.add(1.0, {"cards.activity-unit": 10}, wall_ms=1000)
    feeds.rates.add(2.0, {"cards.activity-unit": 12}, wall_ms=2000)

    recent = ActivityFeed.model_validate(http.get("/v1/activity/recent?limit=5").json())
    assert [r.transaction_id for r in recent.activity] == ["t2", "t1"]
    assert recent.source.topic == "cards.activity-unit"
    assert feeds.malformed == {"cards.activity-unit": 2}
    body = http.get("/v1/activity/recent").text
    assert PAN not in body and "card_number" not in body
    assert http.get("/v1/activity/recent?limit=0").status_code == 422

    alerts = AlertFeed.model_validate(http.get("/v1/alerts").json())
    assert alerts.alerts[0].evidence == {"tx_count": 9, "min_count": 5}

    pipeline = PipelineView.model_validate(http.get("/v1/pipeline").json())
    assert pipeline.queries[0].dropped_by_watermark_seen == 7
    assert pipeline.queries[0].watermark_behind_newest_s == 12.0
    assert [(j.job, j.late_events_seen, j.offsets_behind) for j in pipeline.jobs] == [
        ("cards", 7, 9)
    ]

    rates = Rates.model_validate(http.get("/v1/rates").json())
    assert [(t.topic, t.records_per_s, t.end_offset) for t in rates.topics] == [
        ("cards.activity-unit", 2.0, 12)
    ]
    assert rates.sampled_at == 2000 and len(rates.history) == 1

    paths = http.get("/openapi.json").json()["paths"]
    for path in ("/v1/alerts", "/v1/activity/recent", "/v1/pipeline", "/v1/rates"):
        assert "200" in paths[path]["get"]["responses"]


def test_latest_evaluation(client: tuple[TestClient, Feeds, Path]) -> None:
    http, _, folder = client
    missing = http.get("/v1/evaluations/latest")
    assert missing.status_code == 404 and "no evaluation yet" in missing.text
    folder.mkdir()
    old = folder / "sensors.json"
    old.write_text('{"scenario": "sensors", "paths": {}}')
    os.utime(old, (time.time() - 60, time.time() - 60))
    (folder / "cards.json").write_text('{"scenario": "cards", "paths": {}}')
    (folder / "half-written.json").write_text('{"scenario": ')
    found = Evaluation.model_validate(http.get("/v1/evaluations/latest").json())
    assert found.file == "cards.json" and found.report["scenario"] == "cards"


def test_feed_routes_without_kafka() -> None:
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", None),
        publisher=MemoryPublisher(),
    )
    with TestClient(create_app(service)) as http:
        assert http.get("/v1/alerts").status_code == 503
        assert http.get("/v1/evaluations/latest").status_code == 404
