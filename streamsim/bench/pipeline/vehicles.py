"""`bench pipeline`: the vehicles job on two cores vs its aggregation on the rate source.

Method (one Spark session, `local[2]`, shuffle partitions = 2; each phase on topics and
checkpoints of its own):

1. **Input.** The simulator sends `events` connected-vehicle readings at `--speed max` into a
   fresh two-partition topic (`config/scenarios/vehicles.yaml`, renamed so its truth
   and run record never pass for a real run's).
2. **Subject: the stats query** (the job's windowed aggregation: 1-minute tumbling and
   5-minute sliding windows, mean/min/max/percentile_approx of eight signals, the job's
   watermark and de-duplication, its Kafka + lake sink) drains the topic (AvailableNow) in
   batches of `batch_events`. Sustained events/s: the events of every batch but the first
   (warm-up) over those batches' summed durations.
3. **Reference: the same aggregation** (`stats_stream` on the same watermarked, de-duplicated
   readings) on Spark's rate source family: `rate-micro-batch` gives the same `batch_events`
   rows per batch with event time advancing like the fleet's (`rate` paces rows by wall time
   instead, so it cannot saturate a query); columns shaped like the readings; `noop` sink.
   Same formula. `ratio` = subject / reference: what Kafka, JSON and the sink cost.
4. **The whole job** (dead letters, stats, trips and the detectors' alerts, AvailableNow) on
   the same topic: `job_events_per_s` = events / wall time to drain it.
5. **Alert latency, micro-batch.** The whole job as configured but with a short watermark
   reads a paced fleet (`latency_vehicles` at 1 Hz, event time = now; every fifth vehicle
   overheats once, at a staggered time). Input and alert topics are stamped by the broker
   (LogAppendTime). An alert is due once a reading a watermark past its own event time has
   been appended: latency = alert append - that reading's append.
6. **Real-time Mode.** Spark 4.2 runs only stateless queries in Real-time Mode; the job's
   stateless query is its dead-letter routing. It runs alone on a one-partition topic fed
   `rtm_rate` records/s, one in ten malformed: latency = dead-letter append - input append,
   in Real-time Mode and, for comparison, in micro-batches.

peak_rss_mb: this process and its children (the Spark JVM, the simulator), sampled twice a
second.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from contextlib import suppress
from pathlib import Path
from typing import Any

import orjson
import psutil
from confluent_kafka import Producer

from core.config import StackConfig
from core.errors import StreamsimError
from core.kafka import ensure_topics, producer_config
from core.kafka.admin import admin_client, delete_topics
from streamsim.bench.pipeline.latency import LATENCY_WATERMARK, alert_latency, overheating
from streamsim.bench.pipeline.measure import Throughput, percentiles, throughput, with_input
from streamsim.bench.pipeline.rss import peak_rss
from streamsim.bench.pipeline.settings import (
    CORES,
    PIPELINE,
    Progress,
    bench_stack,
    draining,
    job_config,
    own_checkpoints,
)
from streamsim.bench.pipeline.topics import (
    create_topic,
    produce_input,
    topic_records,
    topic_size,
    wait_for_records,
)
from streamsim.bench.report import BenchReport


def stats_subject(spark: Any, stack: StackConfig, cfg: Any) -> Throughput:
    """The job's stats query draining `cfg.input_topics` into its Kafka + lake sink."""
    from pipeline.aggregates_sink import AggregatesSink
    from pipeline.jobs.vehicles import job
    from pipeline.kafka_io import parse_events, read_kafka
    from pipeline.session import use_rocksdb_state

    use_rocksdb_state(spark)  # as the job
    topic = cfg.vehicles.stats_topic
    ensure_topics(stack, [topic])
    raw = read_kafka(spark, stack, cfg.input_topics, "earliest", cfg.max_offsets_per_trigger)
    events, _ = parse_events(raw, job.VEHICLE_SCHEMA, job.REQUIRED)
    checkpoint = stack.dirs.checkpoints / topic
    sink = AggregatesSink(stack, topic, "bench", "vehicle_id", checkpoint, stack.dirs.lake)
    started = time.monotonic()
    query = (
        job.stats_stream(events, cfg)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return throughput(query.recentProgress, time.monotonic() - started)


def rate_readings(spark: Any, rows_per_batch: int, entities: int, signals: list[str]) -> Any:
    """Readings from `rate-micro-batch`: `rows_per_batch` a batch, event time advancing as a
    fleet of `entities` at 1 Hz, each signal a distinct deterministic series."""
    from pyspark.sql import functions as F

    rows = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows_per_batch)
        .option("numPartitions", CORES)
        .option("startTimestamp", int(time.time() * 1000))
        .option("advanceMillisPerBatch", max(1, round(1000 * rows_per_batch / entities)))
        .load()
    )
    n = F.col("value")
    return rows.select(
        F.concat(F.lit("r-"), n.cast("string")).alias("event_id"),
        F.format_string("veh-%06d", n % entities).alias("vehicle_id"),
        F.unix_millis("timestamp").alias("event_time"),
        F.col("timestamp").alias("event_ts"),
        *((100 + (n % (7 + i)) * 0.5).alias(s) for i, s in enumerate(signals)),
    )


def stats_reference(
    spark: Any, stack: StackConfig, cfg: Any, batch: int, batches: int, entities: int
) -> Throughput:
    """The same aggregation on `rate-micro-batch` (`batch` rows a batch) into `noop`, for
    `batches` batches."""
    from pipeline.jobs.vehicles import job
    from pipeline.session import use_rocksdb_state

    use_rocksdb_state(spark)  # as the job
    signals = list(cfg.vehicles.stats_signals)
    readings = rate_readings(spark, batch, entities, signals)
    started = time.monotonic()
    query = (
        job.stats_stream(readings, cfg)
        .writeStream.format("noop")
        .option("checkpointLocation", str(stack.dirs.checkpoints / f"reference-{uuid.uuid4()}"))
        .start()
    )
    try:
        while query.isActive and len(with_input(query.recentProgress)) < batches:
            time.sleep(0.5)
    finally:
        query.stop()
    done = with_input(query.recentProgress)[:batches]
    return throughput(done, time.monotonic() - started)


def whole_job(spark: Any, stack: StackConfig, cfg: Any) -> dict[str, Any]:
    """Every query of the job draining its input; events/s over the wall time."""
    from pipeline.jobs.vehicles import job

    started = time.monotonic()
    queries = job.start(spark, own_checkpoints(stack, cfg.output_topic), cfg)
    for query in queries:
        query.awaitTermination()
    wall = time.monotonic() - started
    events = sum(topic_size(stack, t) for t in cfg.input_topics)
    return {
        "events_per_s": events / wall,
        "wall_s": wall,
        "queries": {str(q.name): throughput(q.recentProgress, wall) for q in queries},
        "alerts": topic_size(stack, cfg.output_topic),
    }


def paced_rejects(stack: StackConfig, topic: str, rate: int, seconds: float) -> int:
    """`rate` records a second for `seconds`, one in ten malformed (no vehicle_id)."""
    producer = Producer(producer_config(stack, **{"linger.ms": 0}))
    started = time.time()
    for seq in range(int(rate * seconds)):
        body = {"event_id": f"rtm-{seq}", "event_time": int(time.time() * 1000), "seq": seq}
        if seq % 10:
            body["vehicle_id"] = "veh-000001"
        producer.produce(topic, orjson.dumps(body))
        producer.poll(0)
        time.sleep(max(0.0, started + (seq + 1) / rate - time.time()))
    producer.flush(30)
    return int(rate * seconds)


def deadletter_latency(
    spark: Any, stack: StackConfig, prefix: str, mode: str, rate: int, seconds: float
) -> dict[str, Any]:
    """The job's dead-letter routing alone, in `mode`: input append -> dead-letter append."""
    from pipeline.jobs.vehicles import job
    from pipeline.kafka_io import deadletter_records, parse_events, read_kafka, write_kafka
    from pipeline.settings import TriggerSettings
    from pipeline.triggers import output_mode, start_query

    topic, out = f"{prefix}.vehicles", f"{prefix}.deadletter"
    create_topic(stack, topic, 1)
    create_topic(stack, out, 1)
    trigger = TriggerSettings(
        mode=mode, interval="5 seconds" if mode == "realtime" else "0 seconds"
    )
    _, rejects = parse_events(
        read_kafka(spark, stack, [topic], "earliest"), job.VEHICLE_SCHEMA, job.REQUIRED
    )
    checkpoint = str(stack.dirs.checkpoints / prefix)
    writer = write_kafka(
        deadletter_records(rejects, job.NAME), stack, out, checkpoint, output_mode(trigger)
    )
    query = start_query(writer, f"bench.deadletter-{mode}", trigger)
    try:
        time.sleep(8)  # the query's first batch
        malformed = -(-paced_rejects(stack, topic, rate, seconds) // 10)
        wait_for_records(stack, out, malformed, 30)
    finally:
        query.stop()
    sent = {r["event_id"]: ts for r, ts in topic_records(stack, topic) if r}
    latencies = []
    for record, ts in topic_records(stack, out):
        original = orjson.loads((record or {}).get("original") or "null")
        if isinstance(original, dict) and original.get("event_id") in sent:
            latencies.append(float(ts - sent[original["event_id"]]))
    return {"records": len(latencies), "latency_ms": percentiles(latencies)}


# -- the run ----------------------------------------------------------------------------------


def bench_pipeline(
    stack: StackConfig,
    events: int = 200_000,
    batch_events: int = 50_000,
    entities: int = 2_000,
    latency_s: float = 120.0,
    latency_vehicles: int = 500,
    rtm_s: float = 20.0,
    rtm_rate: int = 50,
    progress: Progress = lambda _: None,
) -> BenchReport:
    from core.config import load_model
    from pipeline.config import PipelineConfig
    from pipeline.session import spark_session

    if events < 2 * batch_events:
        raise StreamsimError("events must be at least two batches (the first is warm-up)")
    base = load_model(PipelineConfig, PIPELINE)
    if latency_s < overheating(base)[1] + 20:
        raise StreamsimError("latency_s must leave time for an overheating episode (+20 s)")
    tag = uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory(prefix="streamsim-bench-pipeline-") as tmp, peak_rss() as rss:
        stack = bench_stack(stack, Path(tmp))
        spark = spark_session(stack, app="bench-pipeline")
        try:
            topic = f"bench.{tag}.vehicles"
            progress(f"simulating {events:,} vehicle events into {topic}")
            produced = produce_input(stack, Path(tmp), topic, events, entities, f"bench_{tag}")
            progress(f"subject: the stats query draining {produced:,} events")
            subject = stats_subject(
                spark, stack, draining(base, f"bench.{tag}.subject", topic, batch_events)
            )
            progress(f"subject: {subject}")
            batches = max(4, subject.batches)
            progress(f"reference: the same aggregation on rate-micro-batch, {batches} batches")
            reference = stats_reference(spark, stack, base, batch_events, batches, entities)
            progress(f"reference: {reference}")
            progress("the whole job (dead letters, stats, trips, alerts) draining the topic")
            job = whole_job(spark, stack, draining(base, f"bench.{tag}.job", topic, batch_events))
            progress(f"whole job: {job['events_per_s']:,.0f} events/s")
            progress(f"alert latency: {latency_vehicles} vehicles at 1 Hz for {latency_s:.0f} s")
            live = job_config(
                base, f"bench.{tag}.latency", [f"bench.{tag}.live"], watermark=LATENCY_WATERMARK
            )
            latency = alert_latency(spark, stack, live, latency_vehicles, latency_s)
            progress(f"alert latency: {latency}")
            rtm = {
                mode: deadletter_latency(spark, stack, f"bench.{tag}.{mode}", mode, rtm_rate, rtm_s)
                for mode in ("realtime", "microbatch")
            }
            progress(f"dead-letter routing: {rtm}")
        finally:
            spark.stop()
            with suppress(Exception):  # best effort
                names = admin_client(stack).list_topics(timeout=10).topics
                delete_topics(stack, [t for t in names if tag in t])
    return report(produced, batch_events, subject, reference, job, latency, rtm, rss["mb"])


def report(
    events: int,
    batch_events: int,
    subject: Throughput,
    reference: Throughput,
    job: dict[str, Any],
    latency: dict[str, Any],
    rtm: dict[str, dict[str, Any]],
    peak_rss_mb: float,
) -> BenchReport:
    return BenchReport(
        subject="vehicles stats query (Kafka -> windows -> Kafka + lake)",
        rate_key="events_per_s",
        rate=subject.events_per_s,
        reference="the same aggregation on Spark's rate-micro-batch source, noop sink",
        reference_rate=reference.events_per_s,
        latency_ms=latency["latency_ms"],
        peak_rss_mb=peak_rss_mb,
        extra={
            "cores": CORES,
            "events": events,
            "batch_events": batch_events,
            "subject_events": subject.events,
            "reference_events": reference.events,
            "job_events_per_s": round(job["events_per_s"], 1),
            "job_queries_events_per_s": {
                name: round(t.events_per_s, 1) for name, t in job["queries"].items()
            },
            "job_alerts": job["alerts"],
            "latency_alerts": latency["alerts"],
            "latency_planted": latency["planted"],
            "latency_alerted_planted": latency["alerted_planted"],
            "latency_watermark": LATENCY_WATERMARK,
            "realtime_mode": {
                "query": "dead-letter routing (stateless)",
                "latency_ms": rtm["realtime"]["latency_ms"],
                "microbatch_latency_ms": rtm["microbatch"]["latency_ms"],
                "records": rtm["realtime"]["records"],
            },
            "targets": {"events_per_s": 100_000, "latency_p99_ms": 2_000},
            "load_average": [round(x, 2) for x in psutil.getloadavg()],
        },
    )
