"""Real broker + real Spark: `vehicles` on hand-made vehicle readings.

One run of the job (late rescoring on) over three phases of input, then every output is read back:
stats, trips, alerts, late alerts, dead letters, the lake and the metrics topic; then the batch
oracle (`pipeline.jobs.vehicles.parity`) checks the stats against the input, and against a
corrupted copy of them.

Readings every 2 s from T0 (watermark 2 minutes; the detectors' thresholds are the proposal in
docs/vehicles.md, plus the battery z-score switched on). One vehicle per case:
- faults: overheating (coolant 110 °C for 90 s), battery failure (12.0 V for 60 s: the
  threshold and the z-score), tyre leak (-1.5 kPa/min for 10 min), stuck sensor (oil pressure
  frozen for 150 s while moving), GPS jump (one fix 20 km off), harsh braking (two -7.5 m/s²
  stops 36 s apart), speeding (130 km/h where the limit is 100, for 90 s);
- hard negatives: a hill (coolant +6 °C for a minute), a cold start (coolant 20 -> 70 °C), a
  tunnel (no GPS for 80 s, then a fix 1.8 km on at a normal speed): no alert.
Phase 1: 12 minutes of every vehicle, the overheating vehicle's readings shuffled, a few sent
twice, the braking vehicle's readings of minute 10-11 held back; two malformed records.
Phase 2: the held-back readings (out of order, still on time) and duplicates of the speeding
vehicle's last readings; then a late overheating episode of `veh-late` at minutes 2-5 (behind
the watermark: the main query drops and counts it, the rescoring query raises it `late`).
Phase 3: one reading an hour on moves the watermark past everything.
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
from confluent_kafka import Producer

from core.config import StackConfig
from core.kafka import ensure_topics, producer_config
from core.kafka.reader import read_topic
from pipeline.aggregates_sink import read_aggregates
from pipeline.alerts_sink import read_lake
from pipeline.config import PipelineConfig
from pipeline.jobs.vehicles import job
from pipeline.jobs.vehicles.parity import read_history, vehicle_stats_parity
from pipeline.jobs.vehicles.rules import vehicle_alerts_batch
from pipeline.metrics import MetricsPublisher
from pipeline.progress import ProgressTotals
from pipeline.triggers import query_mode
from tests.oracles.vehicles import (
    FAULTS,
    HARD_NEGATIVES,
    MALFORMED,
    MINUTES,
    STEP_S,
    T0,
    Reading,
    as_records,
    phases,
)

pytestmark = pytest.mark.integration


def produce(stack: StackConfig, topic: str, records: list[tuple[str, bytes]]) -> None:
    producer = Producer(producer_config(stack))
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0


@dataclass
class Run:
    stack: StackConfig
    cfg: PipelineConfig
    modes: dict[str, str | None] = field(default_factory=dict)
    query_ids: dict[str, str] = field(default_factory=dict)  # name -> id: its metrics records
    totals: dict[str, dict[str, Any]] = field(default_factory=dict)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    late_alerts: list[dict[str, Any]] = field(default_factory=list)
    stats: list[dict[str, Any]] = field(default_factory=list)
    trips: list[dict[str, Any]] = field(default_factory=list)
    deadletter: list[dict[str, Any]] = field(default_factory=list)
    on_time: list[Reading] = field(default_factory=list)
    late: list[Reading] = field(default_factory=list)


@pytest.fixture(scope="module")
def run(kafka_stack: StackConfig, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Run:
    tag = uuid.uuid4().hex[:8]
    root = tmp_path_factory.mktemp("vehicles")
    dirs = kafka_stack.dirs.model_copy(
        update={"checkpoints": root / "checkpoints", "lake": root / "lake"}
    )
    stack = kafka_stack.model_copy(update={"dirs": dirs})
    cfg = PipelineConfig.model_validate(
        {
            "job": "vehicles",
            "input_topics": [f"vehicles.telemetry-{tag}"],
            "output_topic": f"alerts-{tag}",
            "deadletter_topic": f"deadletter-{tag}",
            "watermark": "2 minutes",
            "vehicles": {
                "stats_topic": f"aggregates.vehicle-stats-{tag}",
                "trips_topic": f"aggregates.vehicle-trips-{tag}",
                "detectors": {"battery_zscore": {"enabled": True}},
                "deadletter_trigger": {"mode": "microbatch"},  # keep both slots for the rest
                "late": {"mode": "rescore", "watermark": "30 minutes", "topic": f"late-{tag}"},
            },
        }
    )
    ensure_topics(stack, cfg.input_topics, partitions=1)
    metrics = MetricsPublisher(stack, cfg.job, cfg.trigger.mode)
    totals = ProgressTotals(metrics)
    spark.streams.addListener(totals)
    phase_1, phase_2, late, clock = phases()
    result = Run(stack, cfg, on_time=phase_1 + phase_2 + clock, late=late)
    queries = job.start(spark, stack, cfg)
    result.modes = {q.name: query_mode(q) for q in queries}
    result.query_ids = {q.name: str(q.id) for q in queries}
    try:
        for records in (as_records(phase_1) + MALFORMED, as_records(phase_2), as_records(late)):
            produce(stack, cfg.input_topics[0], records)
            for query in queries:
                query.processAllAvailable()
        produce(stack, cfg.input_topics[0], as_records(clock))
        for query in queries:
            query.processAllAvailable()
        for query in queries:  # the no-data batches after the watermark moved
            query.processAllAvailable()
        stats_query = next(q for q in queries if q.name == job.STATS_QUERY)
        progress = stats_query.lastProgress
        assert progress is not None
        last = progress["batchId"]
        deadline = time.monotonic() + 30
        while totals.to_dict().get(job.STATS_QUERY, {}).get("batches", 0) <= last:
            assert time.monotonic() < deadline, "progress reports did not arrive"
            time.sleep(0.2)
    finally:
        for query in queries:
            query.stop()
        spark.streams.removeListener(totals)
        metrics.close()
    result.totals = totals.to_dict()
    result.alerts = read_topic(stack, cfg.output_topic)
    result.late_alerts = read_topic(stack, cfg.vehicles.late.topic)
    result.stats = read_topic(stack, cfg.vehicles.stats_topic)
    result.trips = read_topic(stack, cfg.vehicles.trips_topic)
    result.deadletter = read_topic(stack, cfg.deadletter_topic)
    return result


def kinds(alerts: list[dict[str, Any]]) -> dict[str, set[tuple[str, str]]]:
    found: dict[str, set[tuple[str, str]]] = {}
    for alert in alerts:
        found.setdefault(alert["entity_id"], set()).add((alert["rule"], alert["label"]))
    return found


def test_queries_and_modes(run: Run) -> None:
    assert run.modes == {
        job.DEADLETTER_QUERY: "microbatch",
        job.STATS_QUERY: "microbatch",
        job.TRIPS_QUERY: "microbatch",
        job.ALERTS_QUERY: "microbatch",
        job.LATE_ALERTS_QUERY: "microbatch",
    }


def test_each_detector_fires_on_its_fault_and_nothing_else(run: Run) -> None:
    assert kinds(run.alerts) == {vehicle: expected for vehicle, (_, expected) in FAULTS.items()}
    per_reading = {"gps_jump", "zscore"}  # a jump there and back; every reading far off
    once = [(a["entity_id"], a["rule"]) for a in run.alerts if a["rule"] not in per_reading]
    assert len(once) == len(set(once))  # each fault once
    assert not set(kinds(run.alerts)) & set(HARD_NEGATIVES)


def test_alerts_equal_the_detectors_vectorised_forms_over_the_on_time_input(run: Run) -> None:
    frame = pd.DataFrame(run.on_time)
    oracle = vehicle_alerts_batch(frame, run.cfg.vehicles.enabled_detectors())
    expected = {(r.alert_id, r.rule, tuple(r.event_ids)) for r in oracle.itertuples()}
    got = {(a["alert_id"], a["rule"], tuple(a["event_ids"])) for a in run.alerts}
    assert got == expected
    assert len(run.alerts) == len(expected)  # each id once, despite disorder and duplicates


def test_alert_records_carry_rule_evidence_and_events(run: Run) -> None:
    by_vehicle = {a["entity_id"]: a for a in run.alerts if a["rule"] == "threshold"}
    hot = by_vehicle["veh-overheat"]
    assert (hot["source"], hot["job"], hot["label"]) == ("pipeline", job.NAME, "overheating")
    assert hot["evidence"]["signal"] == "coolant_c" and hot["evidence"]["value"] == 110.0
    assert hot["evidence"]["above"] == 105.0 and hot["evidence"]["duration_s"] >= 60
    assert hot["event_ids"][0] == "veh-overheat-00200"
    assert hot["detected_at"] > T0 and "late" not in hot
    lake = read_lake(run.stack.dirs.lake, job.NAME)
    assert sorted(lake["alert_id"]) == sorted(a["alert_id"] for a in run.alerts)


def test_late_readings_are_dropped_and_counted(run: Run) -> None:
    late_ids = {r["event_id"] for r in run.late}
    for query in (job.STATS_QUERY, job.TRIPS_QUERY, job.ALERTS_QUERY):
        assert run.totals[query]["late_events"] == len(late_ids), query
    assert run.totals[job.LATE_ALERTS_QUERY]["late_events"] == 0
    assert "veh-late" not in kinds(run.alerts)
    assert not [s for s in run.stats if s["vehicle_id"] == "veh-late"]


def test_metrics_topic_reports_late_drops_watermark_and_offsets(run: Run) -> None:
    history = stats_history(run)
    assert sum(r["late_events"] for r in history) == len(run.late)
    assert all(r["job"] == job.NAME for r in history)
    final = history[-1]
    assert final["watermark_ms"] == T0 + 3_600_000 - 120_000
    assert final["watermark_lag_ms"] > 0
    assert [r["batch_id"] for r in history] == list(range(len(history)))
    read = [r for r in history if r["input_rows"]]
    assert read[-1]["end_offsets"] == {run.cfg.input_topics[0]: {"0": count_input(run)}}


def stats_history(run: Run) -> list[dict[str, Any]]:
    """The stats query's progress records, this run's only (other tests' jobs share the
    topic)."""
    return read_history(run.stack, job.STATS_QUERY, run.query_ids[job.STATS_QUERY])


def count_input(run: Run) -> int:
    phase_1, phase_2, late, clock = phases()
    return len(phase_1) + len(MALFORMED) + len(phase_2) + len(late) + len(clock)


def test_late_rescoring_raises_the_late_alert_once(run: Run) -> None:
    assert kinds(run.late_alerts) == {"veh-late": {("threshold", "overheating")}}
    (alert,) = run.late_alerts
    assert alert["late"] is True and alert["source"] == "pipeline"
    assert alert["event_ids"][0] == "veh-late-00150"
    late_lake = read_lake(run.stack.dirs.lake, job.LATE_FOLDER)
    assert list(late_lake["alert_id"]) == [alert["alert_id"]]


def test_window_stats_per_vehicle(run: Run) -> None:
    frame = pd.DataFrame(run.on_time).drop_duplicates("event_id")
    rows = frame[(frame["vehicle_id"] == "veh-overheat")]
    minute = rows[(rows["event_time"] >= T0 + 240_000) & (rows["event_time"] < T0 + 300_000)]
    (stat,) = [
        s
        for s in run.stats
        if s["vehicle_id"] == "veh-overheat"
        and s["window_s"] == 60
        and s["window_start"] == T0 + 240_000
    ]
    assert stat["readings"] == len(minute) == 30
    assert stat["coolant_c_max"] == 110.0 and stat["coolant_c_min"] == minute["coolant_c"].min()
    assert stat["coolant_c_mean"] == pytest.approx(minute["coolant_c"].mean(), rel=1e-12)
    assert stat["coolant_c_p50"] == 110.0
    sliding = [s for s in run.stats if s["vehicle_id"] == "veh-overheat" and s["window_s"] == 300]
    assert {s["slide_s"] for s in sliding} == {60}
    assert sum(s["readings"] for s in sliding) == 5 * len(rows)  # each reading in 5 windows
    assert all(s["schema"] == "aggregates.vehicle-stats/1" for s in run.stats)
    lake = read_aggregates(run.stack.dirs.lake, f"{job.NAME}.stats")
    assert lake is not None and lake.count_rows() == len(run.stats)


def test_trips_per_vehicle(run: Run) -> None:
    trips = {t["vehicle_id"]: t for t in run.trips}
    assert set(trips) == set(FAULTS) | set(HARD_NEGATIVES)  # the clock's trip is still open
    brake = trips["veh-brake"]
    assert brake["readings"] == MINUTES * 30
    assert brake["start_event_time"] == T0 and brake["duration_s"] == MINUTES * 60 - STEP_S
    assert brake["distance_km"] == pytest.approx(0.0444 * (MINUTES * 30 - 1), abs=1e-3)
    assert brake["max_speed_kmh"] == 80.6 and brake["trip_ids"] == [10_001]
    assert trips["veh-speed"]["max_speed_kmh"] == 130.0


def test_malformed_records_go_to_the_dead_letter_topic(run: Run) -> None:
    assert sorted(r["reason"] for r in run.deadletter) == [
        "missing vehicle_id",
        "not a JSON object",
    ]


def test_parity_explains_every_difference_by_late_drops(run: Run, spark: Any) -> None:
    report = vehicle_stats_parity(spark, run.stack, run.cfg, stats_history(run))
    print("\nparity:", json.dumps(report.to_dict(), default=str))
    assert report.ok, report.mismatches
    assert report.late_events == len(run.late)
    assert report.explained_by_late >= 1 and report.windows_with_late_events >= 1
    assert report.matching + report.explained_by_late == report.windows
    # veh-late has no on-time reading: its windows are only in the batch, all explained
    assert report.explained_by_late == count_late_only(run) == 10
    assert report.windows == len(run.stats) + count_late_only(run)


def count_late_only(run: Run) -> int:
    """Windows (of either spec) with no on-time reading at all: the stream never wrote them."""
    late = pd.DataFrame(run.late)
    times = late["event_time"] - T0
    minutes = set(times // 60_000)
    sliding = {m - k for m in minutes for k in range(5)}
    return len(minutes) + len(sliding)


def test_corrupted_stream_output_is_not_explained(run: Run, spark: Any, tmp_path: Path) -> None:
    """One stats row altered and one dropped, both in windows without late readings."""
    rows = [dict(r) for r in run.stats]
    target = next(r for r in rows if r["vehicle_id"] == "veh-tyre" and r["window_s"] == 60)
    target["tyre_rr_kpa_mean"] += 0.5
    dropped = next(r for r in rows if r["vehicle_id"] == "veh-hill" and r["window_s"] == 300)
    rows.remove(dropped)
    topic = f"{run.cfg.vehicles.stats_topic}-corrupt"
    ensure_topics(run.stack, [topic], partitions=1)
    produce(run.stack, topic, [(r["vehicle_id"], orjson.dumps(r)) for r in rows])
    settings = run.cfg.vehicles.model_copy(update={"stats_topic": topic})
    report = vehicle_stats_parity(
        spark,
        run.stack,
        run.cfg.model_copy(update={"vehicles": settings}),
        stats_history(run),
    )
    assert not report.ok
    assert report.unexplained == 2
    assert report.matching + report.explained_by_late + 2 == report.windows
    bad = {(m["vehicle_id"], m["window_s"], m["window_start"]) for m in report.mismatches}
    assert bad == {
        ("veh-tyre", 60, target["window_start"]),
        ("veh-hill", 300, dropped["window_start"]),
    }
