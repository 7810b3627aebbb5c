"""Real broker + real Spark: `cards` on hand-made card transactions.

One run of the job over four phases of input (stopped and restarted from its checkpoint after
the second), then a replay of committed batches, then a re-run with a fresh checkpoint. The
alert set must be exactly the six planted incidents, the same ids every time, each id once in
the topic and the lake, and equal to the detectors' batch oracle over the same input.

Timeline (seconds after T0; watermark 45 minutes):
- phase 1: Paris -> NY in 30 min (alert); NY of an out-of-order pair; Strasbourg -> Kehl in
  10 min; London (a real flight follows); Paris then an online US purchase; Madrid -> Moscow
  in 10 min; ten groceries in Paris; two malformed records.
- phase 2: the Paris use of the out-of-order pair (arrives after its NY use: still one alert);
  Madrid and Moscow again (duplicates); six 1.00 purchases at six web shops in 5 min (card
  testing); 25 cards at one merchant in 4 min (compromised terminal); 900.00 of electronics
  online on the grocery card (account takeover); a use at 5000 s moves the watermark to
  2300 s, which releases the three travel alerts.
- stop; forget the commit of the batch that wrote those alerts; restart from the checkpoint:
  Spark re-runs that batch, and the sink must not write it again.
- phase 3: NY 8 h after London (no alert); a duplicate card-testing purchase (dropped by the
  restored de-duplication state); a use 12 h after T0 that moves the watermark past the rest.
- phase 4: a use at T0 + 500 s: too late, dropped by the watermark and counted.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from core.config import StackConfig
from core.kafka import consumer_config, ensure_topics, producer_config
from core.kafka.admin import admin_client
from core.kafka.offsets import end_offsets
from pipeline.alerts_sink import AlertSink, read_lake, sink_of
from pipeline.config import PipelineConfig
from pipeline.drain import process_all_available
from pipeline.jobs.cards import job as cards
from pipeline.settings import TriggerSettings
from pipeline.triggers import query_mode
from tests.oracles.cards import (
    EXPECTED,
    MALFORMED,
    PHASE_1,
    PHASE_2,
    PHASE_3,
    PHASE_4,
    T0,
    oracle_alerts,
)

pytestmark = pytest.mark.integration


def produce(stack: StackConfig, topic: str, records: list[tuple[str, Any]]) -> None:
    producer = Producer(producer_config(stack))
    for key, value in records:
        producer.produce(
            topic, key=key, value=value if isinstance(value, bytes) else orjson.dumps(value)
        )
    assert producer.flush(30) == 0


def read_records(stack: StackConfig, topic: str) -> list[tuple[bytes, bytes, int, int]]:
    """(key, value, Kafka timestamp, offset) of every record now in `topic`, all partitions.

    Reads each partition from its start to its current end offset: no consumer group to
    join, no guessing when the topic has gone quiet."""
    ends = {p: end for p, end in end_offsets(stack, topic).items() if end > 0}
    consumer = Consumer(consumer_config(stack, group_id=f"test-{uuid.uuid4()}"))
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
    records: list[tuple[bytes, bytes, int, int]] = []
    done = {p: False for p in ends}
    deadline = time.monotonic() + 60
    try:
        while not all(done.values()):
            assert time.monotonic() < deadline, f"{topic}: read {len(records)} records"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            partition, offset = int(msg.partition() or 0), int(msg.offset() or 0)
            records.append((msg.key() or b"", msg.value() or b"", msg.timestamp()[1], offset))
            done[partition] = offset + 1 >= ends[partition]
    finally:
        consumer.close()
    return records


def read_topic(stack: StackConfig, topic: str) -> list[tuple[dict, int]]:
    """Every JSON record of `topic` with its Kafka timestamp."""
    return [(orjson.loads(value), ts) for _, value, ts, _ in read_records(stack, topic)]


def create_log_append_topic(stack: StackConfig, topic: str) -> None:
    """One partition (phases keep their order), broker-stamped timestamps (append time)."""
    config = {"message.timestamp.type": "LogAppendTime"}
    admin = admin_client(stack)  # keep the client alive until the futures resolve
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=config)]).values():
        future.result(30)


def wait_until(predicate: Any, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.5)


@dataclass
class Run:
    stack: StackConfig
    cfg: PipelineConfig
    modes: dict[str, str | None] = field(default_factory=dict)
    alerts: list[tuple[dict, int]] = field(default_factory=list)
    features: list[dict] = field(default_factory=list)
    deadletter: list[tuple[dict, int]] = field(default_factory=list)
    lake: pd.DataFrame = field(default_factory=pd.DataFrame)
    dropped: dict[str, list[int]] = field(default_factory=dict)
    append_ms: dict[int, int] = field(default_factory=dict)  # input offset -> append time
    stats_before: dict[str, int] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)
    forgotten: int = -1


def lake_batches(stack: StackConfig) -> list[int]:
    return [int(b) for b in read_lake(stack.dirs.lake)["batch_id"]]


def forget_batches_from(checkpoint: Path, batch: int) -> int:
    """Make Spark re-run `batch` on restart, as after a crash before its commit: drop the
    commits from `batch` on and the planned offsets after it. Returns `batch`."""
    for folder, first in ((checkpoint / "commits", batch), (checkpoint / "offsets", batch + 1)):
        for path in folder.iterdir():
            name = path.name.removeprefix(".").removesuffix(".crc")
            if name.isdigit() and int(name) >= first:
                path.unlink()
    return batch


def with_dirs(stack: StackConfig, root: Path) -> StackConfig:
    dirs = stack.dirs.model_copy(
        update={"checkpoints": root / "checkpoints", "lake": root / "lake"}
    )
    return stack.model_copy(update={"dirs": dirs})


def start(spark: Any, stack: StackConfig, cfg: PipelineConfig) -> list[Any]:
    return cards.start(spark, stack, cfg)


def process(queries: list[Any]) -> None:
    process_all_available([q for q in queries if query_mode(q) != "realtime"])


def stop(queries: list[Any]) -> None:
    for query in queries:
        query.stop()


def alerts_query(queries: list[Any]) -> Any:
    return next(q for q in queries if q.name == "cards.alerts")


def dedup_drops(query: Any) -> list[int]:
    """Rows each de-duplication operator dropped as too late, over the query's batches."""
    totals: list[int] = []
    for progress in query.recentProgress:
        dedups = [
            op["numRowsDroppedByWatermark"]
            for op in progress["stateOperators"]
            if op["operatorName"] == "dedupeWithinWatermark"
        ]
        totals = [a + b for a, b in zip(totals, dedups, strict=True)] if totals else dedups
    return totals


@pytest.fixture(scope="module")
def run(kafka_stack: StackConfig, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Phases 1-2, stop, restart from the checkpoint, phases 3-4; then read every output."""
    tag = uuid.uuid4().hex[:8]
    stack = with_dirs(kafka_stack, tmp_path_factory.mktemp("cards"))
    cfg = PipelineConfig.model_validate(
        {
            "job": "cards",
            "input_topics": [f"cards.transactions-{tag}"],
            "output_topic": f"alerts-{tag}",
            "deadletter_topic": f"deadletter-{tag}",
            "watermark": "45 minutes",
            "cards": {
                "features_topic": f"aggregates.card-features-{tag}",
                "feature_windows": [
                    {"length": "1 minute"},
                    {"length": "10 minutes", "slide": "5 minutes"},
                ],
                "profiles_topic": None,  # spending from the stream's history (profiles: own test)
                # each phase waits for every query's idle trigger: 1 s, not the default 10
                "features_trigger": {"mode": "microbatch", "interval": "1 second"},
                "velocity": {"min_count": 5},  # the thresholds the planted incidents cross
                "terminal": {"min_distinct_cards": 20},
            },
        }
    )
    create_log_append_topic(stack, cfg.input_topics[0])
    ensure_topics(stack, [cfg.output_topic, cfg.deadletter_topic], partitions=1)
    result = Run(stack, cfg)

    queries = start(spark, stack, cfg)
    result.modes = {q.name: query_mode(q) for q in queries}
    try:
        for phase in (PHASE_1 + MALFORMED, PHASE_2):
            produce(stack, cfg.input_topics[0], phase)
            process(queries)
        before = sink_of(alerts_query(queries))
        assert before is not None
        wait_until(lambda: before.stats()["alerts_written"] >= 3)
        process(queries)
        result.stats_before = before.stats()
    finally:
        stop(queries)
    alerts_checkpoint = stack.dirs.checkpoints / "cards" / "alerts"
    result.forgotten = forget_batches_from(alerts_checkpoint, min(lake_batches(stack)))
    queries = start(spark, stack, cfg)  # the same checkpoints: state and watermark restored
    try:
        for phase in (PHASE_3, PHASE_4):
            produce(stack, cfg.input_topics[0], phase)
            process(queries)
        sink = sink_of(alerts_query(queries))
        assert isinstance(sink, AlertSink)
        wait_until(lambda: sink.stats()["alerts_written"] >= len(EXPECTED) - 3)
        process(queries)
        result.stats = sink.stats()
        result.dropped = {q.name: dedup_drops(q) for q in queries if q.name != "cards.deadletter"}
        result.deadletter = read_topic(stack, cfg.deadletter_topic)
    finally:
        stop(queries)
    result.alerts = read_topic(stack, cfg.output_topic)
    result.features = [r for r, _ in read_topic(stack, cfg.cards.features_topic)]
    result.lake = read_lake(stack.dirs.lake)
    result.append_ms = append_times(stack, cfg.input_topics[0])
    report_latency(result)
    return result


def append_times(stack: StackConfig, topic: str) -> dict[int, int]:
    """Offset -> the broker's append time of every record of a one-partition topic."""
    return {offset: ts for _, _, ts, offset in read_records(stack, topic)}


def report_latency(run: Run) -> None:
    """Print (never assert) input append -> output append latencies, for the record.

    Dead letters: each reject against its own input record. Alerts: against the append of the
    use that moved the watermark past them (window and timer results wait for the watermark;
    the time before that is event time, not processing)."""
    dead = [ts - run.append_ms[r["offset"]] for r, ts in run.deadletter]
    clock_1 = len(PHASE_1 + MALFORMED + PHASE_2) - 1
    clock_2 = clock_1 + len(PHASE_3)
    alerts = [
        ts - run.append_ms[clock_1 if r["rule"] == "impossible_travel" else clock_2]
        for r, ts in run.alerts
    ]
    print(f"\nlatency ms: dead letter (realtime) {dead}; alerts after the watermark {alerts}")


def alert_keys(records: list[dict]) -> set[tuple[str, str, tuple[str, ...]]]:
    return {(r["rule"], r["entity_id"], tuple(r["event_ids"])) for r in records}


def test_queries_and_modes(run: Run) -> None:
    assert run.modes == {
        "cards.deadletter": "realtime",
        "cards.features": "microbatch",
        "cards.alerts": "microbatch",
    }


def test_alert_set_is_exactly_the_planted_incidents(run: Run) -> None:
    records = [r for r, _ in run.alerts]
    assert alert_keys(records) == EXPECTED
    assert len(records) == len(EXPECTED)  # each once: no duplicate, no re-emission


def test_alert_ids_match_the_detectors_batch_oracle(run: Run) -> None:
    oracle = oracle_alerts(run.cfg.cards)
    expected = {(r.alert_id, r.rule, r.entity_id, tuple(r.event_ids)) for r in oracle.itertuples()}
    got = {(r["alert_id"], r["rule"], r["entity_id"], tuple(r["event_ids"])) for r, _ in run.alerts}
    assert got == expected


def test_alert_records_carry_source_job_time_and_evidence(run: Run) -> None:
    by_rule = {}
    for record, kafka_ms in run.alerts:
        assert record["source"] == "pipeline"
        assert record["job"] == "cards"
        assert record["detected_at"] >= T0 and abs(record["detected_at"] - kafka_ms) < 60_000
        by_rule[(record["rule"], record["entity_id"])] = record
    travel = by_rule[("impossible_travel", "tok-pny")]
    assert travel["label"] == "impossible_travel"
    assert 5800 < travel["evidence"]["distance_km"] < 5900
    assert travel["evidence"]["gap_s"] == 1800.0
    assert travel["evidence"]["speed_kmh"] > 10_000
    assert travel["event_time"] == T0 + 1860 * 1000
    velocity = by_rule[("velocity", "tok-ct")]["evidence"]
    assert (velocity["tx_count"], velocity["small_count"]) == (5, 5)  # the duplicate once
    # approx_count_distinct (HyperLogLog++, rsd 0.05) may be off by a little, even this small
    assert abs(velocity["distinct_merchants"] - 5) <= 1
    terminal = by_rule[("compromised_terminal", "m-skimmer-t1")]["evidence"]
    assert abs(terminal["distinct_cards"] - 24) <= 3 and terminal["tx_count"] == 24
    assert by_rule[("spending_anomaly", "tok-ato")]["label"] == "account_takeover"


def test_alerts_are_keyed_by_entity(run: Run) -> None:
    records = read_records(run.stack, run.cfg.output_topic)
    assert len(records) == len(EXPECTED)
    assert all(key.decode() == orjson.loads(value)["entity_id"] for key, value, _, _ in records)


def test_lake_holds_each_alert_once(run: Run) -> None:
    lake = run.lake
    assert sorted(lake["alert_id"]) == sorted(r["alert_id"] for r, _ in run.alerts)
    assert lake["alert_id"].is_unique
    assert set(lake["job"]) == {"cards"} and set(lake["source"]) == {"pipeline"}
    evidence = {r.rule: json.loads(r.evidence) for r in lake.itertuples()}
    assert evidence["velocity"]["tx_count"] == 5
    files = sorted(p.name for p in (run.stack.dirs.lake / "alerts" / "cards").rglob("*"))
    assert files and all(f.startswith("batch-") or len(f) == 36 for f in files), files


def test_features_per_card_window(run: Run) -> None:
    ct = [f for f in run.features if f["card_token"] == "tok-ct"]
    minute = [f for f in ct if f["window_s"] == 60]
    assert sum(f["tx_count"] for f in minute) == 6  # de-duplicated
    assert all(f["small_count"] == 1 and f["slide_s"] == 60 for f in minute)
    sliding = {f["window_start"] - T0: f for f in ct if f["window_s"] == 600}
    assert sorted(sliding) == [2700_000, 3000_000, 3300_000]
    full = sliding[3000_000]
    assert (full["tx_count"], full["slide_s"]) == (6, 300)
    assert abs(full["distinct_merchants"] - 6) <= 1  # approximate
    assert full["amount_sum"] == 6.0 and full["distinct_countries"] == 1
    assert all(f["schema"] == "aggregates.card-features/1" for f in run.features)
    assert not [f for f in run.features if f["card_token"] == "tok-late"]


def test_malformed_records_go_to_the_dead_letter_topic(run: Run) -> None:
    reasons = sorted((r["reason"], r["original"]) for r, _ in run.deadletter)
    assert reasons == [
        ("missing card_token", orjson.dumps({"event_id": "nc-1", "event_time": T0}).decode()),
        ("not a JSON object", "{not json"),
    ]


def test_late_use_is_dropped_and_counted(run: Run) -> None:
    # Each query reads and de-duplicates its input once: the alerts query for one stateful
    # operator, the features query for one aggregation over every window spec.
    assert run.dropped["cards.alerts"] == [1]
    assert run.dropped["cards.features"] == [1]
    assert not [r for r, _ in run.alerts if "late" in r["event_ids"]]


def test_replayed_batch_is_not_written_twice(run: Run) -> None:
    assert run.stats_before["alerts_written"] == 3  # the travel alerts, before the restart
    assert run.stats["batches_replayed"] == 1  # the re-run batch found its lake file
    assert run.stats["alerts_written"] == len(EXPECTED) - 3
    assert run.stats["alerts_known"] == 0
    # the forgotten batch (-1 if none was) is the one lake batch that holds the 3 travel alerts
    assert sorted(lake_batches(run.stack)).count(run.forgotten) == 3


def test_fresh_checkpoint_rerun_gives_the_same_ids_and_no_duplicates(
    run: Run, spark: Any, tmp_path: Path
) -> None:
    stack = run.stack.model_copy(
        update={"dirs": run.stack.dirs.model_copy(update={"checkpoints": tmp_path / "fresh"})}
    )
    # Micro-batch dead letters here: Real-time Mode holds a task slot for its whole batch.
    settings = run.cfg.cards.model_copy(
        update={"deadletter_trigger": TriggerSettings(mode="microbatch")}
    )
    queries = start(spark, stack, run.cfg.model_copy(update={"cards": settings}))
    try:
        process(queries)
        sink = sink_of(alerts_query(queries))
        assert sink is not None
        wait_until(lambda: len(sink.seen_ids) >= len(EXPECTED))
        process(queries)
        seen, stats = set(sink.seen_ids), sink.stats()
    finally:
        stop(queries)
    assert seen == {r["alert_id"] for r, _ in run.alerts}
    assert stats["alerts_written"] == 0 and stats["alerts_known"] == len(EXPECTED)
    lake = read_lake(stack.dirs.lake)
    assert lake["alert_id"].is_unique and len(lake) == len(EXPECTED)
    assert len(read_topic(stack, run.cfg.output_topic)) == len(EXPECTED)
