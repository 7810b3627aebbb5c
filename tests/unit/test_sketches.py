"""Count-Min heavy hitters and HyperLogLog distinct counts (issue 35) on batch DataFrames:
the observed error against exact counts stays within the configured bound on a fixed seed,
and a wrong bound or a broken sketch is caught."""

from __future__ import annotations

import uuid

import numpy as np
import orjson
import pandas as pd
import pytest
from confluent_kafka import Producer
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from core.config import StackConfig
from core.contracts.sketches import DISTINCT_COUNT, HEAVY_HITTER
from core.kafka import ensure_topics
from core.kafka.clients import producer_config
from core.kafka.reader import read_topic
from detectors.sketches import CountMinParams, HllParams, SketchParams
from pipeline.jobs.cards.sketches import DISTINCT_OF, card_sketch_rows
from pipeline.jobs.sensors.sketches import sensor_sketch_rows
from pipeline.sketch_settings import SketchSettings
from pipeline.sketches import SketchSink, SketchState, distinct_records, heavy_records
from streamsim.evaluate.sketches import (
    count_min_errors,
    count_min_figures,
    exact_counts,
    hll_figures,
    sketches_block,
)

T0 = 1_700_000_100_000  # a 5-minute boundary
SEED = 7


def card_events(n: int = 6_000, seed: int = SEED) -> pd.DataFrame:
    """Transactions over 15 minutes: Zipf-busy terminals and merchants, cards drawn uniformly
    (a few terminals see hundreds of distinct cards: the HyperLogLog's estimating range)."""
    rng = np.random.default_rng(seed)
    terminals = np.minimum(rng.zipf(1.3, n), 600)
    return pd.DataFrame(
        {
            "event_id": [f"e{i}" for i in range(n)],
            "event_time": T0 + rng.integers(0, 15 * 60_000, n),
            "card_token": [f"tok_{c:05d}" for c in rng.integers(0, 4_000, n)],
            "merchant_id": [f"m{m}" for m in np.minimum(rng.zipf(1.5, n), 300)],
            "terminal_id": [f"t{t}" for t in terminals],
        }
    )


@pytest.fixture(scope="module")
def events() -> pd.DataFrame:
    return card_events()


@pytest.fixture(scope="module")
def block(spark: SparkSession, events: pd.DataFrame) -> dict:
    return sketches_block(spark, events, card_sketch_rows, SketchParams(), DISTINCT_OF)


def test_count_min_error_is_within_its_bound_on_a_fixed_seed(block: dict) -> None:
    cm = block["count_min"]
    bound = cm["bound"]
    assert bound["eps"] == CountMinParams().eps and bound["depth"] == 7
    assert cm["windows"] == 6  # 3 windows x (terminal, merchant)
    assert cm["queries"] == cm["keys"] > 500
    assert cm["undercounts"] == 0
    assert cm["observed_error"] <= bound["eps"]
    assert cm["beyond_bound_share"] <= bound["delta"]
    assert cm["within_bound"] is True
    # the busiest keys are found: most published heavy hitters are in the exact top
    assert cm["top_precision"] is not None and cm["top_precision"] >= 0.5


def test_hll_error_is_within_its_rse_on_a_fixed_seed(block: dict) -> None:
    hll = block["hll"]
    assert hll["bound"]["rse"] == pytest.approx(HllParams().rse, abs=1e-6)
    assert hll["keys"] > 300
    assert hll["observed_error"] <= hll["bound"]["rse"]
    assert hll["beyond_two_rse_share"] <= 0.05
    assert hll["within_bound"] is True
    assert hll["of"] == {"terminal": "card"}


def test_a_claimed_bound_tighter_than_the_sketch_fails(spark: SparkSession) -> None:
    """A sketch far coarser than the bound claimed for it (eps 0.2 sized, 0.001 claimed):
    the measured overcount is beyond the claim."""
    events = card_events(2_000, seed=11)
    coarse = SketchParams(count_min=CountMinParams(eps=0.2), hll=HllParams(lg_config_k=4))
    block = sketches_block(spark, events, card_sketch_rows, coarse, DISTINCT_OF)
    cm = block["count_min"]
    assert cm["observed_error"] > 0.001
    errors = pd.DataFrame({"error": [cm["observed_error"]], "estimate": [2], "count": [1]})
    assert count_min_figures(errors, eps=0.001, delta=0.01)["within_bound"] is False
    # lgConfigK 4 (16 buckets): its error is beyond the rse of lgConfigK 12
    assert block["hll"]["observed_error"] > HllParams(lg_config_k=12).rse


def test_a_broken_sketch_fails(spark: SparkSession, events: pd.DataFrame) -> None:
    """Answers from the wrong window's sketch undercount and overcount: caught."""
    frame = spark.createDataFrame(events).withColumn("event_ts", F.timestamp_millis("event_time"))
    rows = card_sketch_rows(frame)
    plain = rows.select(F.unix_millis("event_ts").alias("event_time"), "kind", "key", "item")
    exact = exact_counts(plain.toPandas(), 300_000)
    state = SketchState(spark, SketchParams(), delay_ms=0)
    state.add(rows)
    closed = {(w.window_start, w.kind): w for w in state.close(everything=True)}
    n = {at: w.n for at, w in closed.items()}
    shifted = {(s + 300_000, k): w for (s, k), w in closed.items()}

    def wrong(start: int, kind: str, key: str) -> int:
        return shifted.get((start, kind), closed[(start, kind)]).estimate(key)

    figures = count_min_figures(count_min_errors(exact, wrong, n), 0.01, 0.01)
    assert figures["undercounts"] > 0 and figures["within_bound"] is False
    truth = exact[exact["kind"] == "terminal"]
    off = truth["distinct"].astype(float) * 1.1  # a sketch 10 % high
    assert (
        hll_figures(truth["distinct"].astype(float), off, HllParams().rse)["within_bound"] is False
    )


def test_batches_merge_into_the_one_batch_answer(spark: SparkSession, events: pd.DataFrame) -> None:
    """The streaming form (a window's batches merged) answers as one batch does: Count-Min
    merges add counters (equal estimates); a HyperLogLog union is within its bound."""
    frame = spark.createDataFrame(events).withColumn("event_ts", F.timestamp_millis("event_time"))
    rows = card_sketch_rows(frame)
    whole = SketchState(spark, SketchParams(), delay_ms=0)
    whole.add(rows)
    once = {(w.window_start, w.kind): w for w in whole.close(everything=True)}
    split = SketchState(spark, SketchParams(), delay_ms=3_600_000)  # nothing closes early
    for part in (0, 1, 2):
        split.add(rows.where(F.abs(F.hash("key")) % 3 == part))
    assert split.close() == []
    merged = {(w.window_start, w.kind): w for w in split.close(everything=True)}
    assert merged.keys() == once.keys()
    for at, w in once.items():
        assert merged[at].n == w.n
        for key in ("t1", "t2", "m1", "m7"):
            assert merged[at].estimate(key) == w.estimate(key)
        # a union is not the one-pass sketch (DataSketches keeps its HIP estimator only
        # unmerged): it answers within the merged sketch's bound
        assert merged[at].distinct.keys() == w.distinct.keys()
        rse = HllParams().rse
        for key, estimate in w.distinct.items():
            assert merged[at].distinct[key] == pytest.approx(estimate, rel=2 * rse)


def test_records_follow_their_contracts(spark: SparkSession, events: pd.DataFrame) -> None:
    frame = spark.createDataFrame(events.head(800)).withColumn(
        "event_ts", F.timestamp_millis("event_time")
    )
    state = SketchState(spark, SketchParams(), delay_ms=0)
    state.add(card_sketch_rows(frame))
    closed = state.close(everything=True)
    params = SketchParams()
    heavy = list(heavy_records("cards", closed, params.count_min))
    distinct = list(distinct_records("cards", closed, params.hll, DISTINCT_OF))
    assert heavy and distinct
    assert set(heavy[0]) == {f.name for f in HEAVY_HITTER.fields}
    assert set(distinct[0]) == {f.name for f in DISTINCT_COUNT.fields}
    first = [r for r in heavy if r["kind"] == "terminal" and r["window_start"] == T0]
    assert [r["rank"] for r in first] == list(range(1, len(first) + 1)) and len(first) <= 10
    assert first[0]["key"] == "t1"  # Zipf's busiest
    assert first[0]["overcount_bound"] == pytest.approx(0.01 * first[0]["window_items"], 1e-3)
    assert {r["of"] for r in distinct} == {"card"}


def test_a_noisy_device_is_the_windows_heavy_hitter(spark: SparkSession) -> None:
    """60 sensors at one reading a minute over 10 minutes, one of them every 6 s: it heads
    each window's devices; sites count their devices."""
    rows = [
        (f"r{s}-{i}", T0 + i * (6_000 if s == 13 else 60_000), f"s{s}", f"site{s % 3}")
        for s in range(60)
        for i in range(100 if s == 13 else 10)
    ]
    frame = spark.createDataFrame(
        rows, "event_id string, event_time long, sensor_id string, site string"
    ).withColumn("event_ts", F.timestamp_millis("event_time"))
    state = SketchState(spark, SketchParams(), delay_ms=0)
    state.add(sensor_sketch_rows(frame))
    closed = state.close(everything=True)
    devices = [w for w in closed if w.kind == "device"]
    assert len(devices) == 2
    for w in devices:
        assert w.estimates[0] == ("s13", 50)
        assert w.estimates[1][1] < 10  # the rest: 5 readings a window, an overcount < eps * N
    sites = [w for w in closed if w.kind == "site"]
    assert all(w.distinct == {"site0": 20.0, "site1": 20.0, "site2": 20.0} for w in sites)


def test_the_sink_publishes_closed_windows(spark: SparkSession, kafka_stack: StackConfig) -> None:
    """`SketchSink` on two batches (as `foreachBatch` calls it): nothing is published until
    the watermark passes a window's end; then its records are on the two topics."""
    run = f"sketch-{uuid.uuid4().hex[:8]}"
    settings = SketchSettings(
        heavy_hitters_topic=f"{run}.heavy", distinct_counts_topic=f"{run}.distinct"
    )
    ensure_topics(kafka_stack, [settings.heavy_hitters_topic, settings.distinct_counts_topic])
    sink = SketchSink(kafka_stack, "cards", settings, card_sketch_rows, DISTINCT_OF, 60_000)
    events = card_events(1_000, seed=3)
    first = events[events["event_time"] < T0 + 300_000]
    later = events[events["event_time"] >= T0 + 600_000]

    def frame(part: pd.DataFrame) -> DataFrame:
        return spark.createDataFrame(part).withColumn("event_ts", F.timestamp_millis("event_time"))

    sink(frame(first), 0)
    assert sink.published == {"heavy_hitters": 0, "distinct_counts": 0}
    sink(frame(later), 1)  # the first window (and the second, empty of input here) closes
    heavy = read_topic(kafka_stack, settings.heavy_hitters_topic)
    distinct = read_topic(kafka_stack, settings.distinct_counts_topic)
    assert len(heavy) == sink.published["heavy_hitters"] == 20  # top 10 terminals, merchants
    assert {r["window_start"] for r in heavy} == {T0}
    assert len(distinct) == sink.published["distinct_counts"] == first["terminal_id"].nunique()


def test_evaluate_reads_the_runs_events_and_reports_the_block(
    spark: SparkSession, kafka_stack: StackConfig
) -> None:
    """`evaluate`'s path: the run's transactions on the job's input topic (another run's and a
    resent copy left out), the block with its source and event count."""
    from pathlib import Path

    from core.config import load_model
    from pipeline.config import PipelineConfig
    from streamsim.evaluate import report

    run = f"sk{uuid.uuid4().hex[:6]}"
    topic = f"{run}.activity"
    ensure_topics(kafka_stack, [topic])
    mine = card_events(600, seed=5).assign(event_id=lambda f: run + "-" + f["event_id"])
    other = card_events(50, seed=6).assign(event_id=lambda f: "other-" + f["event_id"])
    producer = Producer(producer_config(kafka_stack))
    for frame in (mine, mine.head(20), other):
        for r in frame.assign(amount=5.0).to_dict("records"):
            producer.produce(topic, orjson.dumps(r))
    assert producer.flush(30) == 0
    cfg = load_model(PipelineConfig, Path("config/pipelines/cards.yaml"))
    cfg = cfg.model_copy(update={"input_topics": [topic]})
    block = report._sketches(kafka_stack, spark, cfg, {}, run)
    assert block["source"] == topic and block["events"] == 600
    assert block["count_min"]["within_bound"] and block["hll"]["within_bound"]
    assert block["count_min"]["windows"] == 6


def test_online_purchases_count_at_their_merchant(spark: SparkSession) -> None:
    """No terminal id at all (every purchase online): the terminal is the merchant."""
    events = card_events(300, seed=9).assign(terminal_id=None)
    block = sketches_block(spark, events, card_sketch_rows, SketchParams(), DISTINCT_OF)
    assert block["hll"]["keys"] == len(exact_merchant_windows(events))
    assert block["count_min"]["within_bound"] and block["hll"]["within_bound"]


def exact_merchant_windows(events: pd.DataFrame) -> set[tuple[int, str]]:
    starts = events["event_time"] // 300_000 * 300_000
    return set(zip(starts, events["merchant_id"], strict=True))
