"""`bench pipeline`'s phases at tiny sizes on the session broker and Spark: what each counts
and matches, not how fast (benchmarks measure; tests assert behaviour)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from core.config import StackConfig, load_model
from pipeline.config import PipelineConfig
from streamsim.bench import pipeline as bench

pytestmark = pytest.mark.integration

#: Events a drain reads, in batches of BATCH: two batches, the first one warm-up.
EVENTS, BATCH = 1_000, 500


@pytest.fixture(scope="module")
def stack(kafka_stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> StackConfig:
    root = tmp_path_factory.mktemp("bench-pipeline")
    dirs = kafka_stack.dirs.model_copy(
        update={"checkpoints": root / "checkpoints", "lake": root / "lake"}
    )
    return kafka_stack.model_copy(update={"dirs": dirs})


@pytest.fixture(scope="module")
def base() -> Any:
    return load_model(PipelineConfig, bench.PIPELINE)


@pytest.fixture(scope="module")
def tag() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def subject(stack: StackConfig, spark: Any, base: Any, tag: str, tmp_path_factory: Any) -> Any:
    topic = f"bench.{tag}.vehicles"
    work = tmp_path_factory.mktemp("bench-input")
    # 10 vehicles: 100 s of event time, so the 10 s watermark closes windows
    produced = bench.produce_input(stack, work, topic, EVENTS, 10, f"bench_{tag}")
    drain = bench.draining(base, f"bench.{tag}.subject", topic, BATCH)
    cfg = drain.model_copy(update={"watermark": "10 seconds"})
    return produced, cfg, bench.stats_subject(spark, stack, cfg)


def test_subject_reads_every_event_produced_once(subject: Any) -> None:
    produced, _, result = subject
    assert produced >= EVENTS
    assert result.events == produced
    assert result.batches >= -(-produced // BATCH)  # no batch above BATCH
    assert result.measured < result.events  # the first batch is warm-up, not measured
    assert result.events_per_s > 0


def test_subject_publishes_window_stats(subject: Any, stack: StackConfig) -> None:
    _, cfg, _ = subject
    stats = [r for r, _ in bench.topic_records(stack, cfg.vehicles.stats_topic) if r]
    assert stats
    assert {r["window_s"] for r in stats} <= {60, 300}
    assert all(r["readings"] >= 1 for r in stats)


def test_reference_processes_the_rows_of_each_batch(
    stack: StackConfig, spark: Any, base: Any
) -> None:
    result = bench.stats_reference(spark, stack, base, 500, 3, 20)
    assert (result.batches, result.events, result.measured) == (3, 1_500, 1_000)
    assert result.events_per_s > 0


def quick_overheating(base: Any) -> Any:
    detectors = dict(base.vehicles.detectors)
    detectors["overheating"] = detectors["overheating"].model_copy(update={"min_duration_s": 1})
    return detectors


def test_alert_latency_matches_alerts_to_the_planted_overheating(
    stack: StackConfig, spark: Any, base: Any, tag: str
) -> None:
    cfg = bench.job_config(
        base,
        f"bench.{tag}.latency",
        [f"bench.{tag}.live"],
        watermark="2 seconds",
        vehicle={"detectors": quick_overheating(base)},
    )
    # the shortest run the bench allows: an episode of 1 + 10 s, and 10 s for it to be due
    result = bench.alert_latency(spark, stack, cfg, vehicles=20, seconds=21)
    assert result["planted"] == 4
    assert result["alerted_planted"] == result["planted"]
    assert result["alerted_other"] == 0
    assert result["alerts"] == result["planted"]  # one episode each, one alert each
    latency = result["latency_ms"]  # measured for each of the 4 alerts: ordered quantiles
    assert latency is not None and latency["p50"] <= latency["p99"]


def test_realtime_mode_routes_every_malformed_record(
    stack: StackConfig, spark: Any, tag: str
) -> None:
    result = bench.deadletter_latency(spark, stack, f"bench.{tag}.rtm", "realtime", 20, 3)
    assert result["records"] == 6  # one in ten of 60
    latency = result["latency_ms"]  # broker append times: input, then its dead letter
    assert latency is not None and latency["p50"] <= latency["p99"]


def test_report_has_the_contract_keys(tmp_path: Path) -> None:
    run = bench.Throughput(1000.0, 2000, 3000, 3, 4.0)
    report = bench.report(
        3000,
        BATCH,
        run,
        bench.Throughput(4000.0, 2000, 3000, 3, 1.0),
        {"events_per_s": 500.0, "queries": {"q": run}, "alerts": 1},
        {"latency_ms": {"p50": 1.0, "p99": 2.0}, "alerts": 1, "planted": 1, "alerted_planted": 1},
        {mode: {"records": 1, "latency_ms": None} for mode in ("realtime", "microbatch")},
        100.0,
    ).to_dict()
    contract = {"subject", "events_per_s", "reference", "reference_rate", "ratio", "latency_ms"}
    assert contract | {"peak_rss_mb"} <= set(report)
    assert report["ratio"] == 0.25
    assert report["latency_ms"] == {"p50": 1.0, "p99": 2.0}


# -- `bench pipeline --job cards` -------------------------------------------------------


@pytest.fixture(scope="module")
def card_job() -> Any:
    return bench.JOBS["cards"]


@pytest.fixture(scope="module")
def card_base(card_job: Any) -> Any:
    return load_model(PipelineConfig, card_job.pipeline)


@pytest.fixture(scope="module")
def card_drain(
    stack: StackConfig, spark: Any, card_job: Any, card_base: Any, tag: str, tmp_path_factory: Any
) -> Any:
    topic = f"bench.{tag}.cards"
    work = tmp_path_factory.mktemp("bench-cards")
    produced = bench.produce_input(
        stack, work, topic, EVENTS, 100, f"bench_cards_{tag}", card_job.scenario
    )
    cfg = bench.job_draining("cards", card_base, f"bench.{tag}.cardjob", topic, BATCH)
    return produced, cfg, bench.whole_job_drain(spark, stack, "cards", cfg)


def test_card_job_drains_every_event_in_every_query(card_drain: Any) -> None:
    produced, _, result = card_drain
    assert produced >= EVENTS and result["events"] == produced
    assert set(result["queries"]) == {
        "cards.deadletter",
        "cards.features",
        "cards.alerts",
    }
    for name in ("cards.features", "cards.alerts"):
        query = result["queries"][name]
        assert query.events == produced  # each query reads the topic once, to its end
        assert query.batches >= -(-produced // BATCH)  # no batch above BATCH
    whole = result["throughput"]
    assert whole.events == produced
    # the warm-up left out is one first batch: Spark may split maxOffsetsPerTrigger across
    # partitions a record short of BATCH, never above it
    assert BATCH // 2 < produced - whole.measured <= BATCH
    assert 0 < whole.events_per_s < 10_000_000
    assert 0 < whole.wall_s < result["wall_s"] + 1


def test_card_reference_runs_the_job_logic_on_the_rate_source(
    stack: StackConfig, spark: Any, card_job: Any, card_base: Any
) -> None:
    result = bench.job_reference(spark, stack, card_job, card_base, 500, 3, 50, 5.0)
    assert (result.events, result.measured) == (1_500, 1_000)
    assert result.batches == 3
    assert 0 < result.events_per_s < 10_000_000


def test_card_alert_latency_matches_alerts_to_the_planted_travel(
    stack: StackConfig, spark: Any, card_base: Any, tag: str
) -> None:
    prefix = f"bench.{tag}.cardlatency"
    cfg = bench.job_outputs("cards", card_base, prefix).model_copy(
        update={"input_topics": [f"{prefix}.live"], "watermark": "2 seconds"}
    )
    # 450 uses: the 4 uses abroad at 4.6-5.2 s, home again by 6.0 s; the last use, at 9 s,
    # puts the watermark (2 s) past them all
    result = bench.card_alert_latency(spark, stack, cfg, cards=40, rate=50, seconds=9)
    assert result["planted"] == 8  # 4 cards abroad once: there and back
    assert result["alerted_planted"] == 8
    assert result["alerted_other"] == 0
    latency = result["latency_ms"]
    assert 0 <= latency["p50"] <= latency["p99"] < 60_000


def test_job_report_has_the_contract_keys() -> None:
    run = bench.Throughput(1000.0, 2000, 3000, 3, 4.0)
    whole = {"throughput": run, "wall_s": 5.0, "queries": {"q": run}, "alerts": 2}
    report = bench.job_report(
        bench.JOBS["cards"],
        50,
        3000,
        BATCH,
        whole,
        bench.Throughput(4000.0, 2000, 3000, 3, 1.0),
        {"latency_ms": None, "alerts": 0, "planted": 0, "alerted_planted": 0},
        1.5,
        {"mb": 0.0},
    ).to_dict()
    assert report["job"] == "cards"
    assert (report["events_per_s"], report["reference_rate"], report["ratio"]) == (
        1000.0,
        4000.0,
        0.25,
    )
    # a figure not measured is left out, not zero
    assert "latency_ms" not in report and "peak_rss_mb" not in report
    assert "cold_events_per_s" not in report


# -- `bench pipeline --job sensors | shipping`, and the floor -------------------------------


def test_card_floor_reads_the_topic_once_with_the_job_schema(
    stack: StackConfig, spark: Any, card_drain: Any, tag: str
) -> None:
    produced, cfg, _ = card_drain
    sources = bench.input_sources(bench.JOBS["cards"], cfg)
    assert [(s.topic, s.entity) for s in sources] == [(cfg.input_topics[0], "card_token")]
    floor = bench.floor_drain(spark, stack, sources, cfg, f"floor.{tag}.cards")
    assert floor.events == produced  # every record, once, in batches of at most BATCH
    assert floor.batches >= -(-produced // BATCH)
    assert BATCH // 2 < produced - floor.measured <= BATCH  # the first batch is warm-up
    assert 0 < floor.events_per_s < 10_000_000


def drain_with_floor(
    stack: StackConfig, spark: Any, name: str, tag: str, work: Path, keys: int
) -> tuple[int, Any, dict[str, Any], Any]:
    job = bench.JOBS[name]
    base = load_model(PipelineConfig, job.pipeline)
    topics = bench.input_topics(job, f"bench.{tag}.{name}")
    produced = bench.produce_job_input(stack, work, job, topics, EVENTS, keys, tag)
    cfg = bench.job_draining(name, base, f"bench.{tag}.{name}job", topics, BATCH)
    whole = bench.whole_job_drain(spark, stack, name, cfg)
    sources = bench.input_sources(job, cfg)
    floor = bench.floor_drain(spark, stack, sources, cfg, f"floor.{tag}.{name}")
    return produced, cfg, whole, floor


@pytest.fixture(scope="module")
def sensor_drain(stack: StackConfig, spark: Any, tag: str, tmp_path_factory: Any) -> Any:
    work = tmp_path_factory.mktemp("bench-sensors")
    return drain_with_floor(stack, spark, "sensors", tag, work, 100)


def test_sensor_job_runs_its_alerts_and_drains_every_query(
    sensor_drain: Any, stack: StackConfig
) -> None:
    produced, cfg, whole, floor = sensor_drain
    assert produced >= EVENTS and whole["events"] == produced
    assert cfg.sensors.sensor_alerts  # the bench runs the rules, whatever the config says
    # the engine form (the default) counts in its alerts query, and judges silence in another
    assert set(whole["queries"]) == {"sensors.deadletter", "sensors.alerts", "sensors.silence"}
    for query in whole["queries"].values():
        assert query.events == produced  # each query reads the topic once, to its end
    assert whole["alerts"] == bench.topic_size(stack, cfg.sensors.alerts_topic)  # not counts
    assert floor.events == produced


@pytest.fixture(scope="module")
def shipping_drain(stack: StackConfig, spark: Any, tag: str, tmp_path_factory: Any) -> Any:
    work = tmp_path_factory.mktemp("bench-shipping")
    return drain_with_floor(stack, spark, "shipping", tag, work, 10_054)


def test_shipping_job_reads_its_three_kinds_from_their_own_topics(
    shipping_drain: Any, stack: StackConfig
) -> None:
    produced, cfg, whole, floor = shipping_drain
    assert [t.rsplit(".", 2)[-2:] for t in cfg.input_topics] == [
        ["shipping", "positions"],
        ["shipping", "containers"],
        ["shipping", "port-events"],
    ]
    sizes = [bench.topic_size(stack, t) for t in cfg.input_topics]
    assert sum(sizes) == produced >= EVENTS  # every event routed
    # the first 1,000 events: containers and positions (no ship in port yet), each on its own
    schemas = [
        {(r or {}).get("schema") for r, _ in bench.topic_records(stack, t)}
        for t in cfg.input_topics
    ]
    assert schemas[:2] == [{"shipping.position/1"}, {"shipping.container/1"}]
    assert schemas[2] <= {"shipping.port-event/1"}
    assert whole["events"] == produced
    assert set(whole["queries"]) == {"shipping.alerts", "shipping.deadletter"}
    assert whole["queries"]["shipping.alerts"].events == produced  # its three sources
    assert floor.events == produced


def test_job_report_gives_both_ratios_from_the_measured_figures() -> None:
    job = bench.Throughput(900.0, 2000, 3000, 3, 4.0)
    cold = bench.Throughput(600.0, 2000, 3000, 3, 5.0)
    whole = {"throughput": job, "wall_s": 5.0, "queries": {"q": job}, "alerts": 2, "cold": cold}
    reference = bench.Throughput(3600.0, 2000, 3000, 3, 1.0)
    floor = bench.Throughput(1200.0, 2000, 3000, 3, 2.0)
    report = bench.job_report(
        bench.JOBS["shipping"], 50, 3000, BATCH, whole, reference, {}, 1.5, {"mb": 10.0}, floor
    ).to_dict()
    assert report["job"] == "shipping" and report["subject"].startswith("shipping:")
    assert (report["ratio"], report["floor_rate"], report["floor_ratio"]) == (0.25, 1200.0, 0.75)
    assert report["cold_events_per_s"] == 600.0  # the warm-up run, beside the figure
    assert report["floor_events"] == 3000
    assert "latency_alerts" not in report  # no paced phase for shipping: left out
