"""The skew estimator in Spark (`pipeline.clock`): the batch form against `detectors.clock` on a
DataFrame, and on the real broker: a sensor run's events through Spark, the corrected time
scored against truth, and the streaming per-device table on its compacted topic."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pytest
from pyspark.sql import functions as F

from core.config import StackConfig
from detectors.clock import CORRECTED, OFFSET, ClockParams, estimate
from pipeline.clock import (
    corrected_events,
    latest_offsets,
    offset_records,
    offset_table,
    offsets_lookup,
    offsets_writer,
    with_clock,
)
from pipeline.jobs.sensors.job import event_schema
from pipeline.kafka_io import parse_events, read_kafka, read_kafka_batch
from scenarios.catalog import ScenarioConfig, run_scenario
from simulators.sinks.kafka import KafkaSink
from streamsim.config.kinds import load_file
from streamsim.verify.readers import consume_topic
from tests.unit.test_clock import stream

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DAY_MS = 86_400_000


def test_the_window_function_gives_the_detectors_figures(spark) -> None:
    frame = stream(11)
    params = ClockParams(window_s=90)
    expected = estimate(frame, params).set_index(["entity_id", "event_time"])
    df = spark.createDataFrame(frame).withColumn("kafka_time", F.timestamp_millis("kafka_ts"))
    got = pd.DataFrame(with_clock(df, "entity_id", params).toPandas())
    got = got.set_index(["entity_id", "event_time"])
    got = got.loc[expected.index]
    assert (got[OFFSET].to_numpy() == expected[OFFSET].to_numpy()).all()
    assert (got[CORRECTED].to_numpy() == expected[CORRECTED].to_numpy()).all()
    # the table: per device and window of send time, the envelope over that window
    table = pd.DataFrame(offset_table(df, "entity_id", params, slide_s=30).toPandas())
    lags = frame.assign(lag=frame["kafka_ts"] - frame["event_time"])
    row = table.iloc[len(table) // 2]
    inside = lags[
        (lags["entity_id"] == row["device_id"])
        & (lags["kafka_ts"] >= row["as_of"] - params.window_ms)
        & (lags["kafka_ts"] < row["as_of"])
    ]
    assert row[OFFSET] == -inside["lag"].min() and row["records"] == len(inside)


def test_corrected_events_look_each_device_up_in_the_table(spark) -> None:
    frame = stream(12, devices=3)
    df = spark.createDataFrame(frame).withColumn("kafka_time", F.timestamp_millis("kafka_ts"))
    published = offset_records(offset_table(df, "entity_id", ClockParams(window_s=120)))
    known = published.where(F.col("key") != "dev-2")  # dev-2 not in the table yet
    judged = corrected_events(df, "entity_id", latest_offsets(known))
    judged = judged.withColumn("ts_ms", F.unix_millis("event_ts")).drop("event_ts")
    got = pd.DataFrame(judged.toPandas()).sort_values("kafka_ts")
    assert (got["device_event_time"].to_numpy() == frame["event_time"].to_numpy()).all()
    assert (got["ts_ms"] == got["event_time"]).all()
    error = (got["event_time"] - got["true_time"]).abs()
    table_side = got["entity_id"] != "dev-2"
    assert (error[table_side] <= 1000).mean() > 0.99
    # the fallback: the send time (the delay uncorrected; the held records a minute off)
    fallback = got[~table_side]
    assert (fallback["event_time"] == fallback["kafka_ts"]).all()


def sensor_run(stack: StackConfig) -> tuple[ScenarioConfig, pd.DataFrame]:
    """The shipped sensor fleet's classes and clocks, 150 sensors for 5 minutes, to Kafka."""
    _, shipped = load_file(REPO / "config/scenarios/sensors.yaml")
    assert isinstance(shipped, ScenarioConfig)
    tag = uuid.uuid4().hex[:8]
    data = shipped.model_dump(mode="json")
    data.update(entities=150, duration_s=300, seed=51, name=f"it_clock_{tag}")
    data["domain"]["topic"] = f"it.clock.{tag}"
    cfg = ScenarioConfig.model_validate(data)
    summary = run_scenario(cfg, KafkaSink(stack), speed="max")
    assert summary.failed == 0 and summary.events > 2_000
    got = consume_topic(stack, f"truth.{cfg.name}")
    truth = pd.DataFrame([orjson.loads(v) for v in got.values])
    return cfg, truth[truth["emit_time"].notna()].drop_duplicates("event_id")


def test_spark_corrects_a_sensor_run_from_kafka(
    kafka_stack: StackConfig, spark, tmp_path: Path
) -> None:
    cfg, truth = sensor_run(kafka_stack)
    raw = read_kafka_batch(spark, kafka_stack, [cfg.domain.topic])
    events, _ = parse_events(raw, event_schema("sensor_id"))
    corrected = pd.DataFrame(
        with_clock(events, "sensor_id").select("event_id", CORRECTED, OFFSET).toPandas()
    )
    scored = corrected.drop_duplicates("event_id").merge(truth, on="event_id")
    assert len(scored) == len(truth)
    steady = scored[scored["clock_offset_ms"].abs() < DAY_MS]
    error = (steady[CORRECTED] - steady["true_time"]).abs()
    raw_error = (steady["event_time"] - steady["true_time"]).abs()
    assert (raw_error > 1000).mean() > 0.05  # legacy loggers' clocks are seconds off
    assert (error <= 1000).mean() >= 0.95, error.describe()

    # streaming: the per-device table on its compacted topic, each device's latest row
    topic = f"it.clock-offsets.{cfg.name}"
    stream_events, _ = parse_events(
        read_kafka(spark, kafka_stack, [cfg.domain.topic]), event_schema("sensor_id")
    )
    writer = offsets_writer(
        stream_events, "sensor_id", kafka_stack, topic, str(tmp_path / "offsets")
    )
    query = writer.trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(180), "the offsets query did not finish"
    finally:
        query.stop()
    # a job on corrected time: the stream looks each record up in the table (stream-static)
    corrected_stream = corrected_events(
        stream_events, "sensor_id", offsets_lookup(spark, kafka_stack, topic)
    )
    sink_name = f"clock_{cfg.name}"
    lookup = (
        corrected_stream.select("event_id", "event_time", "device_event_time")
        .writeStream.format("memory")
        .queryName(sink_name)
        .option("checkpointLocation", str(tmp_path / "corrected"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert lookup.awaitTermination(180), "the corrected query did not finish"
    finally:
        lookup.stop()
    judged = pd.DataFrame(spark.table(sink_name).toPandas()).drop_duplicates("event_id")
    judged = judged.merge(truth, on="event_id", suffixes=("", "_truth"))
    assert len(judged) == len(truth)
    judged = judged[judged["clock_offset_ms"].abs() < DAY_MS]
    assert (judged["device_event_time"] == judged["event_time_truth"]).all()
    assert ((judged["event_time"] - judged["true_time"]).abs() <= 1000).mean() >= 0.95

    table = consume_topic(kafka_stack, topic)
    latest: dict[str, dict] = {}
    for key, value in zip(table.keys, table.values, strict=True):
        row = orjson.loads(value)
        assert key is not None and row["device_id"] == (
            key.decode() if isinstance(key, bytes) else key
        )
        if row["device_id"] not in latest or row["as_of"] >= latest[row["device_id"]]["as_of"]:
            latest[row["device_id"]] = row
    assert len(latest) > 100
    true_offset = truth.sort_values("emit_time").groupby("entity_id")["clock_offset_ms"].last()
    off = [
        abs(r[OFFSET] - true_offset[d])
        for d, r in latest.items()
        if not r["reset"] and abs(true_offset[d]) < DAY_MS
    ]
    assert np.mean(np.array(off) <= 1000) >= 0.9, sorted(off)[-10:]
