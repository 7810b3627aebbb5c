"""Real broker + real Spark: job `shipping` on a small seeded shipping run.

The run (`tests.shipping_run` at 3 ships, 150 boxes, 4 simulated days, seed 13: ~32,000
events; the batch form raises alerts of four incident types, no box is lost overboard) goes
to JSONL, then into the job's three topics under their DESIGN keys in emit order, with two
malformed records. The job starts at the topics' end offsets before that (other tests' runs
share the topics) and writes to an alerts topic of its own. Phase 2: container readings 60
days older than their box's newest reading, beyond the job's `history`: dropped, and counted
on the metrics topic. Checks: the job's alerts are those of the batch form (`run_rules` over
the same events), each once; flushed voyages' alerts are `late: true` with their delay; the
drops are counted; the malformed records are dead-lettered; each query's `numInputRows` is
the records it read, each once (one source for the three topics read each three times).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest

from core.config import StackConfig
from core.contracts import topics
from core.contracts.events import PIPELINE_PROGRESS
from core.kafka import ensure_topics
from core.kafka.reader import read_topic
from pipeline.config import PipelineConfig
from pipeline.jobs.shipping import job
from pipeline.metrics import MetricsPublisher
from pipeline.progress import ProgressTotals, source_offsets
from streamsim.evaluate.shipping import TOPIC_COLUMNS, frame_of, run_rules
from tests.shipping_run import TOPIC, keyed_records, produce, seeded_events, starting_after

pytestmark = pytest.mark.integration

DAY_MS = 86_400_000
SETTLE_S = 2


def records_read(starting: str, progress: dict[str, Any] | None) -> int:
    """Records between the job's starting offsets and where a query's last batch ended."""
    start = orjson.loads(starting)
    end = source_offsets(progress or {}, "endOffset") or {}
    return sum(o - start[t][p] for t, parts in end.items() for p, o in parts.items())


def input_rows(totals: ProgressTotals, query: str, expected: int) -> int:
    """The query's `numInputRows` summed over its batches, once the listener (asynchronous)
    has seen at least `expected` of them or 10 s have passed."""
    deadline = time.monotonic() + 10
    while True:
        got = int(totals.to_dict().get(query, {}).get("input_rows", 0))
        if got >= expected or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return seeded_events(tmp_path_factory.mktemp("ship-run"))


def test_job_raises_the_batch_alerts_and_counts_late_drops(
    kafka_stack: StackConfig, spark: Any, tmp_path: Path, events: list[dict[str, Any]]
) -> None:
    tag = uuid.uuid4().hex[:8]
    dirs = kafka_stack.dirs.model_copy(
        update={"checkpoints": tmp_path / "checkpoints", "lake": tmp_path / "lake"}
    )
    stack = kafka_stack.model_copy(update={"dirs": dirs})
    inputs = list(job.SOURCES)
    ensure_topics(stack, [*inputs, topics.METRICS.name])
    cfg = PipelineConfig.model_validate(
        {
            "job": "shipping",
            "input_topics": inputs,
            "output_topic": f"it-ship-alerts-{tag}",
            "deadletter_topic": f"it-ship-dead-{tag}",
            "starting_offsets": starting_after(stack, inputs),
            "watermark": "30 minutes",
            "trigger": {"mode": "microbatch", "interval": "1 second"},
            "shipping": {"history": "30 days", "settle": f"{SETTLE_S} seconds"},
        }
    )
    records = keyed_records(events)
    boxes = [e for e in events if e["schema"] == "shipping.container/1"][:3]
    stale = [
        {**e, "event_id": f"{e['event_id']}-stale", "event_time": e["event_time"] - 60 * DAY_MS}
        for e in boxes
    ]
    malformed = [
        (topics.SHIPPING_CONTAINERS.name, "x", b"not json"),
        (topics.SHIPPING_POSITIONS.name, "y", b'{"event_id": "no-time", "ship_id": "1"}'),
    ]
    metrics = MetricsPublisher(stack, cfg.job, cfg.trigger.mode)
    totals = ProgressTotals(metrics)
    spark.streams.addListener(totals)
    started = int(time.time() * 1000)
    queries = job.start(spark, stack, cfg)
    try:
        produce(stack, [*records, *malformed])
        job.drain_all(queries, stack, SETTLE_S, timeout_s=300)
        produce(
            stack,
            [(topics.SHIPPING_CONTAINERS.name, e["container_id"], orjson.dumps(e)) for e in stale],
        )
        job.drain_all(queries, stack, SETTLE_S, timeout_s=300)
        for query in queries:
            assert query.isActive, query.exception()
    finally:
        for query in queries:
            query.stop()
    try:
        read = {q.name: records_read(cfg.starting_offsets, q.lastProgress) for q in queries}
        assert read[job.ALERTS_QUERY] == read[job.DEADLETTER_QUERY] >= len(records) + len(stale)
        for name, count in read.items():  # each record read once per query, not once per topic
            assert input_rows(totals, name, count) == count, name
    finally:
        spark.streams.removeListener(totals)
        metrics.close()

    frames = {
        topic: frame_of([e for e in events if TOPIC[e["schema"]][0] == topic], columns)
        for topic, columns in TOPIC_COLUMNS.items()
    }
    batch = {a.alert_id: a.rule for a in run_rules(*frames.values())}
    alerts = read_topic(stack, cfg.output_topic)
    streamed = {a["alert_id"]: a["rule"] for a in alerts}
    assert len(alerts) == len(streamed)  # each alert once
    assert set(batch.values()) == {
        "reefer_failure", "door_tamper", "missed_unload", "route_deviation"
    }  # fmt: skip
    assert streamed == batch
    late = [a for a in alerts if a["late"]]
    assert late and all(a["late_by_ms"] > 30 * 60_000 for a in late)
    assert all(a["late_by_ms"] <= 30 * 60_000 for a in alerts if not a["late"])

    drops = [
        r
        for r in read_topic(stack, topics.METRICS.name)
        if r.get("schema") == PIPELINE_PROGRESS
        and r.get("query") == job.DROPS_QUERY
        and r["at"] >= started
    ]
    routed = sum(1 + (e["ship_id"] is not None) for e in stale)  # box log, and ship log if aboard
    assert sum(r["late_events"] for r in drops) == routed
    dead = read_topic(stack, cfg.deadletter_topic)
    assert sorted(d["reason"] for d in dead) == [
        "missing or non-integer event_time",
        "not a JSON object",
    ]
