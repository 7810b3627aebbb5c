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
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import psutil
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from core.config import StackConfig
from core.config.loader import read_yaml
from core.contracts import VEHICLE_TELEMETRY
from core.errors import StreamsimError
from core.kafka import consumer_config, ensure_topics, producer_config
from core.kafka.admin import admin_client, delete_topics
from core.kafka.offsets import end_offsets
from streamsim.bench.report import BenchReport
from streamsim.bench.simulator import simulate
from streamsim.kafka.broker import MAIN_CLASS as BROKER_MAIN_CLASS
from streamsim.stackfile import write_stack_file

SCENARIO = Path("config/scenarios/vehicles.yaml")
PIPELINE = Path("config/pipelines/vehicles.yaml")
CORES = 2
#: In the latency phase: the job's watermark, and one vehicle in this many overheats once.
LATENCY_WATERMARK = "5 seconds"
PLANTED_EVERY = 5

#: A busy machine starts Python workers slowly (a transformWithState operator starts one at
#: planning, which must connect back in time).
SLOW_MACHINE = {"spark.python.authenticate.socketTimeout": "120s"}

Progress = Callable[[str], None]
Record = tuple[dict[str, Any] | None, int]  # (parsed JSON value, broker timestamp ms)


@dataclass
class Throughput:
    events_per_s: float  # sustained: batches after the first
    measured: int  # events in those batches
    events: int  # events in every batch
    batches: int
    wall_s: float


# -- measuring ------------------------------------------------------------------------------


def is_broker(proc: psutil.Process) -> bool:
    """Whether `proc` is a local Kafka broker (a child when the bench started it): the job's
    RSS leaves it out."""
    with suppress(psutil.Error):
        return BROKER_MAIN_CLASS in proc.cmdline()
    return False


@contextmanager
def peak_rss() -> Iterator[dict[str, float]]:
    """Peak RSS (MB) of this process and its children but a local broker (the job: Spark's
    JVM and its Python workers), sampled in a thread: `["mb"]`."""
    peak = {"mb": 0.0}
    stop = threading.Event()

    def sample() -> None:
        me = psutil.Process()
        while not stop.is_set():
            total = 0
            for proc in [me, *me.children(recursive=True)]:
                if is_broker(proc):
                    continue
                with suppress(psutil.Error):
                    total += proc.memory_info().rss
            peak["mb"] = max(peak["mb"], total / 2**20)
            stop.wait(0.5)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join(5)


def batch_events(progress: Mapping[str, Any]) -> int:
    """Events a batch read, from its sources' offsets: a union reads its source once per
    branch, and numInputRows counts every read.

    >>> batch_events({"sources": [{"startOffset": '{"t": {"0": 5}}',
    ...     "endOffset": '{"t": {"0": 9, "1": 3}}', "numInputRows": 14}]})
    7
    """
    return sum(offset_delta(source) for source in progress.get("sources", []))


def offset_delta(source: Mapping[str, Any]) -> int:
    """A Kafka (`{topic: {partition: offset}}`) or rate-micro-batch (`{"offset": n}`) source's
    offsets between a batch's start and end."""
    start, end = (orjson.loads(source.get(k) or "null") for k in ("startOffset", "endOffset"))
    start = start or {}
    if not end:
        return 0
    if "offset" in end:
        return int(end["offset"]) - int(start.get("offset", 0))
    return sum(
        int(offset) - int(start.get(topic, {}).get(p, 0))
        for topic, parts in end.items()
        for p, offset in parts.items()
    )


def with_input(progress: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [p for p in progress if batch_events(p)]


def throughput(progress: Sequence[Mapping[str, Any]], wall_s: float) -> Throughput:
    """Sustained rate over the batches that read input, the first (warm-up) left out.

    >>> batch = lambda a, b, ms: {"durationMs": {"triggerExecution": ms},
    ...     "sources": [{"startOffset": f'{{"offset": {a}}}', "endOffset": f'{{"offset": {b}}}'}]}
    >>> throughput([batch(0, 10, 5000), batch(10, 30, 1000), batch(30, 30, 500)], 7.0)
    Throughput(events_per_s=20.0, measured=20, events=30, batches=2, wall_s=7.0)
    """
    read = [(p, batch_events(p)) for p in with_input(progress)]
    steady = read[1:] or read
    measured = sum(n for _, n in steady)
    seconds = sum(p["durationMs"]["triggerExecution"] for p, _ in steady) / 1000
    rate = measured / seconds if seconds else 0.0
    return Throughput(rate, measured, sum(n for _, n in read), len(read), wall_s)


def percentiles(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    p50, p99 = np.percentile(np.asarray(values, dtype=float), [50, 99])
    return {"p50": round(float(p50), 1), "p99": round(float(p99), 1)}


# -- Kafka ----------------------------------------------------------------------------------


def create_topic(stack: StackConfig, topic: str, partitions: int) -> None:
    """A topic whose records the broker stamps with its own append time."""
    new = NewTopic(topic, partitions, 1, config={"message.timestamp.type": "LogAppendTime"})
    admin = admin_client(stack)  # held until the future is done
    admin.create_topics([new])[topic].result(30)


def topic_records(stack: StackConfig, topic: str) -> list[Record]:
    """Every record of a topic: its JSON object (None if not one) and its timestamp."""
    ends = {p: end for p, end in end_offsets(stack, topic).items() if end > 0}
    consumer = Consumer(consumer_config(stack, group_id=f"bench-{uuid.uuid4()}"))
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    out: list[Record] = []
    deadline = time.monotonic() + 120
    try:
        while ends and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=0.2):
                if msg.error() is not None:
                    continue
                with suppress(orjson.JSONDecodeError):
                    value = orjson.loads(msg.value() or b"null")
                    out.append((value if isinstance(value, dict) else None, msg.timestamp()[1]))
                if (msg.offset() or 0) + 1 >= ends.get(msg.partition() or 0, 0):
                    ends.pop(msg.partition() or 0, None)
    finally:
        consumer.close()
    return out


def topic_size(stack: StackConfig, topic: str) -> int:
    return sum(end_offsets(stack, topic).values())


def wait_for_records(stack: StackConfig, topic: str, count: int, timeout_s: float) -> None:
    """Until `topic` holds `count` records or `timeout_s` has passed."""
    deadline = time.monotonic() + timeout_s
    while topic_size(stack, topic) < count and time.monotonic() < deadline:
        time.sleep(0.5)


# -- configuration ----------------------------------------------------------------------------


def bench_stack(stack: StackConfig, work: Path) -> StackConfig:
    """Two cores, a shuffle partition per core, checkpoints and lake in `work`."""
    conf = {**stack.spark.conf, **SLOW_MACHINE}
    spark = stack.spark.model_copy(
        update={"master": f"local[{CORES}]", "shuffle_partitions": CORES, "conf": conf}
    )
    dirs = stack.dirs.model_copy(
        update={"checkpoints": work / "checkpoints", "lake": work / "lake"}
    )
    return stack.model_copy(update={"spark": spark, "dirs": dirs})


def own_checkpoints(stack: StackConfig, name: str) -> StackConfig:
    """`stack` with checkpoints in a folder of their own (a job's queries name theirs by job)."""
    dirs = stack.dirs.model_copy(update={"checkpoints": stack.dirs.checkpoints / name})
    return stack.model_copy(update={"dirs": dirs})


def job_config(base: Any, prefix: str, inputs: list[str], **update: Any) -> Any:
    """`base` (a PipelineConfig) reading `inputs`, writing topics named `<prefix>.<output>`."""
    vehicle = base.vehicles.model_copy(
        update={
            "stats_topic": f"{prefix}.vehicle-stats",
            "trips_topic": f"{prefix}.vehicle-trips",
            **update.pop("vehicle", {}),
        }
    )
    return base.model_copy(
        update={
            "input_topics": inputs,
            "output_topic": f"{prefix}.alerts",
            "deadletter_topic": f"{prefix}.deadletter",
            "vehicles": vehicle,
            **update,
        }
    )


def draining(base: Any, prefix: str, topic: str, batch: int) -> Any:
    """The job reading `topic` to its end in batches of `batch` events, then stopping."""
    once = base.trigger.model_copy(update={"mode": "available_now"})
    return job_config(
        base,
        prefix,
        [topic],
        trigger=once,
        max_offsets_per_trigger=batch,
        vehicle={"deadletter_trigger": once},
    )


# -- phases -----------------------------------------------------------------------------------


def produce_input(
    stack: StackConfig,
    work: Path,
    topic: str,
    events: int,
    entities: int,
    name: str,
    scenario_path: Path = SCENARIO,
) -> int:
    """The scenario's events (renamed `name`) into a two-partition `topic`; its size."""
    ensure_topics(stack, [topic], partitions=2)
    data = read_yaml(scenario_path)
    data.update(name=name, entities=entities)
    data["domain"]["topic"] = topic
    scenario, stack_file = work / f"{name}.yaml", work / "stack.yaml"
    scenario.write_text(yaml.safe_dump(data))
    env = write_stack_file(stack, stack_file)  # client secrets by environment only
    args = ["--seed", "1", "--events", str(events), "--speed", "max", "--sink", "kafka"]
    simulate([str(scenario), "--config", str(stack_file), *args], env)
    return topic_size(stack, topic)


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


def overheating(cfg: Any) -> tuple[float, float]:
    """(coolant threshold, seconds it must last) of the job's overheating detector."""
    params = cfg.vehicles.detectors["overheating"]
    return float(params.above), float(params.min_duration_s)


def paced_fleet(
    stack: StackConfig, topic: str, vehicles: int, seconds: float, hot: tuple[float, float]
) -> set[str]:
    """`vehicles` readings a second for `seconds`, event time = now. Every `PLANTED_EVERY`th
    vehicle runs above the coolant threshold once, for 10 s longer than the detector's
    duration, starting at a staggered second; returns the planted vehicles."""
    above, duration = hot
    episode = int(duration) + 10
    if seconds < episode + 10:
        raise StreamsimError(
            f"--latency-s must be at least {episode + 10} s: an overheating episode lasts "
            f"{episode} s (the detector's {duration:.0f} s + 10), or no alert can be due"
        )
    starts = max(1, int(seconds) - episode - 5)
    planted = {v: (v // PLANTED_EVERY * 7) % starts for v in range(0, vehicles, PLANTED_EVERY)}
    producer = Producer(producer_config(stack, **{"linger.ms": 5}))
    started = time.time()
    for tick in range(int(seconds)):
        now_ms = int(time.time() * 1000)
        for v in range(vehicles):
            start = planted.get(v)
            coolant = above + 5 if start is not None and start <= tick < start + episode else 90.0
            producer.produce(topic, orjson.dumps(paced_reading(v, tick, now_ms, coolant)))
        producer.poll(0)
        time.sleep(max(0.0, started + tick + 1 - time.time()))
    producer.flush(30)
    return {f"veh-{v:06d}" for v in planted}


def paced_reading(vehicle: int, tick: int, now_ms: int, coolant: float) -> dict[str, Any]:
    """A healthy reading but for the coolant temperature: steady speed, gently varying
    signals (no flatline), no braking, below the speed limit."""
    wobble = (tick + vehicle) % 3
    return {
        "schema": VEHICLE_TELEMETRY.id,
        "event_id": f"lat-{vehicle}-{tick}",
        "vehicle_id": f"veh-{vehicle:06d}",
        "event_time": now_ms,
        "seq": tick,
        "trip_id": vehicle,
        "speed_limit_kmh": 100.0,
        "lat": 48.0 + 0.0002 * tick,
        "lon": 9.0 + 0.001 * vehicle,
        "speed_kmh": 72.0 + wobble,
        "odometer_km": 1000.0 + 0.02 * tick,
        "coolant_c": coolant + 0.1 * wobble,
        "oil_pressure_kpa": 300.0 + wobble,
        "battery_v": 14.0 + 0.01 * wobble,
        **{
            f"tyre_{t}_kpa": 240.0 + 0.1 * ((tick + i) % 2)
            for i, t in enumerate(("fl", "fr", "rl", "rr"))
        },
        "accel_long_ms2": 0.1 * (wobble - 1),
    }


def alert_latency(
    spark: Any, stack: StackConfig, cfg: Any, vehicles: int, seconds: float
) -> dict[str, Any]:
    """The whole job (micro-batches) on a paced fleet: latency of each alert once due."""
    from pipeline.jobs.vehicles import job
    from pipeline.settings import duration_ms

    topic = cfg.input_topics[0]
    create_topic(stack, topic, 2)
    create_topic(stack, cfg.output_topic, 1)
    queries = job.start(spark, own_checkpoints(stack, cfg.output_topic), cfg)
    try:
        time.sleep(5)  # the first (empty) batches
        planted = paced_fleet(stack, topic, vehicles, seconds, overheating(cfg))
        wait_for_records(stack, cfg.output_topic, len(planted), 30)
    finally:
        for query in queries:
            query.stop()
    records = topic_records(stack, cfg.output_topic)
    due = due_latencies(topic_records(stack, topic), records, duration_ms(cfg.watermark))
    alerted = {r["entity_id"] for r, _ in records if r}
    return {
        "latency_ms": percentiles(due),
        "alerts": sum(1 for r, _ in records if r),
        "planted": len(planted),
        "alerted_planted": len(alerted & planted),
        "alerted_other": len(alerted - planted),
    }


def due_latencies(inputs: list[Record], alerts: list[Record], watermark_ms: int) -> list[float]:
    """Per alert: its append time - the first append of a reading `watermark_ms` or more past
    the alert's event time (the reading that let the watermark pass it).

    >>> readings = [({"event_time": t}, 1000 + t) for t in (0, 10, 20, 30)]
    >>> due_latencies(readings, [({"event_time": 5}, 1100)], 10)
    [80.0]
    """
    pairs = sorted((int(r["event_time"]), ts) for r, ts in inputs if r)
    times = np.array([t for t, _ in pairs])
    first_append = np.minimum.accumulate(np.array([ts for _, ts in pairs])[::-1])[::-1]
    out = []
    for alert, ts in alerts:
        i = int(np.searchsorted(times, int((alert or {})["event_time"]) + watermark_ms))
        if i < len(times):
            out.append(float(ts - first_append[i]))
    return out


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


# -- whole jobs (`bench pipeline --job JOB`) --------------------------------------------------


@dataclass(frozen=True)
class JobBench:
    """What `bench pipeline --job` needs of a job: its input scenario, config and shape."""

    name: str
    scenario: Path
    pipeline: Path
    entity: str  # the key field (card_token, vehicle_id)
    default_keys: int


JOBS = {
    "cards": JobBench(
        "cards",
        Path("config/scenarios/cards.yaml"),
        Path("config/pipelines/cards.yaml"),
        "card_token",
        20_000,
    ),
    "vehicles": JobBench("vehicles", SCENARIO, PIPELINE, "vehicle_id", 2_000),
}
#: In the card latency phase: one card in this many uses a card-present terminal abroad once.
CARD_PLANTED_EVERY = 10
PARIS, NEW_YORK = (48.8566, 2.3522), (40.7128, -74.0060)


def job_module(name: str) -> Any:
    if name == "cards":
        from pipeline.jobs.cards import job as card

        return card
    from pipeline.jobs.vehicles import job as vehicle

    return vehicle


def job_streams(name: str, events: Any, cfg: Any) -> dict[str, Any]:
    """The job's stateful queries' logic on parsed `events` (any source), by query name."""
    module = job_module(name)
    if name == "cards":
        streams: dict[str, Any] = module.logic_streams(events, cfg)
        return streams
    return {
        "stats": module.stats_stream(events, cfg),
        "trips": module.trips_stream(events, cfg),
        "alerts": module.alerts_stream(events, cfg.vehicles, cfg.watermark),
    }


def job_schema(name: str) -> Any:
    module = job_module(name)
    return module.TRANSACTION_SCHEMA if name == "cards" else module.VEHICLE_SCHEMA


def job_outputs(name: str, cfg: Any, prefix: str) -> Any:
    """`cfg` with every output topic named `<prefix>.<output>`; cards without
    profiles: the bench's input, events and rates are the transactions alone."""
    if name == "cards":
        settings = cfg.cards.model_copy(
            update={"features_topic": f"{prefix}.card-features", "profiles_topic": None}
        )
        return cfg.model_copy(
            update={
                "output_topic": f"{prefix}.alerts",
                "deadletter_topic": f"{prefix}.deadletter",
                "cards": settings,
            }
        )
    return job_config(cfg, prefix, cfg.input_topics)


def job_draining(name: str, base: Any, prefix: str, topic: str, batch: int) -> Any:
    """The whole job reading `topic` to its end in batches of `batch` events, then stopping."""
    once = base.trigger.model_copy(update={"mode": "available_now"})
    cfg = job_outputs(name, base, prefix).model_copy(
        update={"input_topics": [topic], "trigger": once, "max_offsets_per_trigger": batch}
    )
    section = "cards" if name == "cards" else "vehicles"
    settings = getattr(cfg, section).model_copy(update={"deadletter_trigger": once})
    return cfg.model_copy(update={section: settings})


def batch_span(progress: Mapping[str, Any]) -> tuple[float, float]:
    """(start, end) of a batch, epoch seconds."""
    from pipeline.progress import iso_ms

    start = (iso_ms(progress.get("timestamp")) or 0) / 1000
    return start, start + progress["durationMs"]["triggerExecution"] / 1000


def sustained(per_query: Mapping[str, Sequence[Mapping[str, Any]]], events: int) -> Throughput:
    """The whole job's sustained rate over all its queries (sharing the cores): the events
    after the first batch of each query, over the time from the latest end of a first batch
    to the latest end of a last batch (every query has read its first batch by then, so that
    is warm-up left out, as `throughput` leaves out one query's first batch).

    >>> b = lambda s, ms, a, z: {"timestamp": f"2026-01-01T00:00:0{s}.000Z",
    ...     "durationMs": {"triggerExecution": ms},
    ...     "sources": [{"startOffset": f'{{"offset": {a}}}', "endOffset": f'{{"offset": {z}}}'}]}
    >>> q1 = [b(0, 2000, 0, 10), b(2, 1000, 10, 30)]
    >>> q2 = [b(0, 3000, 0, 10), b(3, 2000, 10, 30)]
    >>> sustained({"a": q1, "b": q2}, 30).events_per_s
    10.0
    """
    read = {name: with_input(p) for name, p in per_query.items()}
    read = {name: p for name, p in read.items() if p}
    if not read:
        return Throughput(0.0, 0, events, 0, 0.0)
    first_end = max(batch_span(p[0])[1] for p in read.values())
    last_end = max(batch_span(p[-1])[1] for p in read.values())
    first_events = max(batch_events(p[0]) for p in read.values())
    measured = events - first_events
    seconds = last_end - first_end
    rate = measured / seconds if seconds > 0 and measured > 0 else 0.0
    batches = max(len(p) for p in read.values())
    return Throughput(
        rate, measured, events, batches, last_end - min(batch_span(p[0])[0] for p in read.values())
    )


def whole_job_drain(spark: Any, stack: StackConfig, name: str, cfg: Any) -> dict[str, Any]:
    """Every query of the job draining its input (AvailableNow); `sustained` over them."""
    module = job_module(name)
    started = time.monotonic()
    queries = module.start(spark, own_checkpoints(stack, cfg.output_topic), cfg)
    for query in queries:
        query.awaitTermination()
    wall = time.monotonic() - started
    events = sum(topic_size(stack, t) for t in cfg.input_topics)
    progress = {str(q.name): list(q.recentProgress) for q in queries}
    return {
        "throughput": sustained(progress, events),
        "wall_s": wall,
        "events": events,
        "queries": {n: throughput(p, wall) for n, p in progress.items()},
        "batches": {n: len(with_input(p)) for n, p in progress.items()},
        "alerts": topic_size(stack, cfg.output_topic),
    }


def event_time_rate(stack: StackConfig, topic: str) -> float:
    """Events per second of event time in `topic` (how fast its event time advances), over
    its middle 98%: a skewed or reset device clock (1970, 2200) does not stretch the span."""
    times = [int(r["event_time"]) for r, _ in topic_records(stack, topic) if r]
    return event_time_per_s(times)


def event_time_per_s(times: Sequence[int]) -> float:
    """Events per second of event time over the middle 98% of `times`.

    >>> round(event_time_per_s([*range(0, 100_000, 100), 10**12]))  # one event every 100 ms
    10
    """
    if len(times) < 2:
        return 1.0
    low, high = np.percentile(np.asarray(times, dtype=np.float64), [1, 99])
    inside = sum(1 for t in times if low <= t <= high)
    return inside * 1000 / (high - low) if high > low else 1.0


def rate_events(
    spark: Any, schema: Any, entity: str, rows_per_batch: int, keys: int, per_event_s: float
) -> Any:
    """Parsed events from `rate-micro-batch`, shaped like the job's input schema: `keys`
    entities, event time advancing `per_event_s` events per second of event time (as in the
    Kafka input), every field a deterministic series (amounts 10-99: no card testing; each
    entity at a home position: no travel)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, DoubleType, LongType

    advance = min(2**31 - 1, max(1, round(1000 * rows_per_batch / per_event_s)))
    rows = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows_per_batch)
        .option("numPartitions", CORES)
        .option("startTimestamp", int(time.time() * 1000))
        .option("advanceMillisPerBatch", advance)
        .load()
    )
    n, key = F.col("value"), F.col("value") % keys
    columns = []
    for i, field in enumerate(schema.fields):
        name = field.name
        if name == "event_id":
            value = F.concat(F.lit("r-"), n.cast("string"))
        elif name == entity:
            value = F.format_string("key-%06d", key)
        elif name == "event_time":
            value = F.unix_millis("timestamp")
        elif name == "lat":
            value = 40.0 + (key % 100) * 0.05
        elif name == "lon":
            value = 2.0 + (key % 97) * 0.05
        elif name == "amount":
            value = 10.0 + n % 90
        elif name == "merchant_id":
            value = F.format_string("m-%05d", n % 5_000)
        elif isinstance(field.dataType, DoubleType):
            value = 100 + (n % (7 + i)) * 0.5
        elif isinstance(field.dataType, LongType):
            value = n
        elif isinstance(field.dataType, BooleanType):
            value = F.lit(True)
        else:
            value = F.concat(F.lit(f"{name}-"), (n % 7).cast("string"))
        columns.append(value.cast(field.dataType).alias(name))
    return rows.select(
        *columns,
        F.col("timestamp").alias("event_ts"),
        F.col("timestamp").alias("kafka_time"),
    )


def job_reference(
    spark: Any,
    stack: StackConfig,
    job: JobBench,
    cfg: Any,
    batch: int,
    batches: int,
    keys: int,
    per_event_s: float,
) -> Throughput:
    """The job's queries' logic on `rate-micro-batch` (`batch` rows a batch) into `noop`, all
    at once as in the job, for `batches` batches each; `sustained` over them."""
    from pipeline.session import use_rocksdb_state, use_state_store

    if job.name == "cards":  # as the job
        use_state_store(spark, cfg.cards.state_store)
    else:
        use_rocksdb_state(spark)
    events = rate_events(spark, job_schema(job.name), job.entity, batch, keys, per_event_s)
    queries = [
        stream.writeStream.format("noop")
        .queryName(f"reference.{name}")
        .option("checkpointLocation", str(stack.dirs.checkpoints / f"reference-{uuid.uuid4()}"))
        .start()
        for name, stream in job_streams(job.name, events, cfg).items()
    ]
    try:
        while any(q.isActive and len(with_input(q.recentProgress)) < batches for q in queries):
            time.sleep(0.5)
    finally:
        for query in queries:
            query.stop()
    progress = {str(q.name): with_input(q.recentProgress)[:batches] for q in queries}
    return sustained(progress, batch * batches)


def paced_cards(stack: StackConfig, topic: str, cards: int, rate: int, seconds: float) -> int:
    """`rate` card-present transactions a second for `seconds` over `cards` cards, each card
    at home in Paris at a merchant of its own, event time = now; every `CARD_PLANTED_EVERY`th
    card makes one use in New York halfway through (two impossible-travel alerts: there and
    back). Returns the planted cards."""
    producer = Producer(producer_config(stack, **{"linger.ms": 5}))
    total = int(rate * seconds)
    planted_at = total // 2
    planted = 0
    started = time.time()
    for seq in range(total):
        card = seq % cards
        where = PARIS
        if card % CARD_PLANTED_EVERY == 0 and planted_at <= seq < planted_at + cards:
            where, planted = NEW_YORK, planted + 1
        body = {
            "schema": "cards.transaction/1",
            "event_id": f"lat-{seq}",
            "transaction_id": f"lat-{seq}",
            "card_token": f"tok-{card:06d}",
            "event_time": int(time.time() * 1000),
            "amount": 20.0 + seq % 50,
            "currency": "EUR",
            "merchant_id": f"m-{card:06d}",
            "merchant_category": "retail",
            "channel": "card_present",
            "card_present": True,
            "lat": where[0],
            "lon": where[1],
            "country": "FR",
        }
        producer.produce(topic, orjson.dumps(body), key=f"tok-{card:06d}")
        if seq % 100 == 0:
            producer.poll(0)
            time.sleep(max(0.0, started + seq / rate - time.time()))
    producer.flush(30)
    return planted


def card_alert_latency(
    spark: Any, stack: StackConfig, cfg: Any, cards: int, rate: int, seconds: float
) -> dict[str, Any]:
    """The whole card job (micro-batches) on paced transactions: latency of each alert once
    due (its append - the append of the first use a watermark past its event time)."""
    from pipeline.jobs.cards import job
    from pipeline.settings import duration_ms

    topic = cfg.input_topics[0]
    create_topic(stack, topic, 2)
    create_topic(stack, cfg.output_topic, 1)
    queries = job.start(spark, own_checkpoints(stack, cfg.output_topic), cfg)
    try:
        time.sleep(5)  # the first (empty) batches
        planted = paced_cards(stack, topic, cards, rate, seconds)
        wait_for_records(stack, cfg.output_topic, 2 * planted, 30)
    finally:
        for query in queries:
            query.stop()
    records = topic_records(stack, cfg.output_topic)
    due = due_latencies(topic_records(stack, topic), records, duration_ms(cfg.watermark))
    return {
        "latency_ms": percentiles(due),
        "alerts": sum(1 for r, _ in records if r),
        "planted": 2 * planted,
        "alerted_planted": sum(1 for r, _ in records if r and r["rule"] == "impossible_travel"),
        "alerted_other": sum(1 for r, _ in records if r and r["rule"] != "impossible_travel"),
    }


def bench_job(
    stack: StackConfig,
    job_name: str,
    events: int = 200_000,
    batch_events: int = 50_000,
    keys: int | None = None,
    latency_s: float = 60.0,
    latency_rate: int = 500,
    progress: Progress = lambda _: None,
) -> BenchReport:
    """`bench pipeline --job JOB`: see the module docstring (phases 1, 4, 5 and the reference
    of the whole job's logic on `rate-micro-batch`)."""
    from core.config import load_model
    from pipeline.config import PipelineConfig
    from pipeline.session import spark_session

    job = JOBS[job_name]
    keys = keys or job.default_keys
    if events < 2 * batch_events:
        raise StreamsimError("events must be at least two batches (the first is warm-up)")
    base = load_model(PipelineConfig, job.pipeline)
    tag = uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory(prefix="streamsim-bench-job-") as tmp, peak_rss() as rss:
        stack = bench_stack(stack, Path(tmp))
        spark = spark_session(stack, app="bench-pipeline")
        try:
            topic = f"bench.{tag}.input"
            progress(f"simulating {events:,} {job_name} events ({keys:,} keys) into {topic}")
            produced = produce_input(
                stack, Path(tmp), topic, events, keys, f"bench_{tag}", job.scenario
            )
            per_event_s = event_time_rate(stack, topic)
            progress(f"the whole job draining {produced:,} events")
            drain = job_draining(job_name, base, f"bench.{tag}.job", topic, batch_events)
            whole = whole_job_drain(spark, stack, job_name, drain)
            progress(f"whole job: {whole['throughput']}; per query {whole['queries']}")
            state_mb = dir_mb(stack.dirs.checkpoints)
            batches = max(4, min(8, max(whole["batches"].values(), default=4)))
            progress(f"reference: the job's logic on rate-micro-batch, {batches} batches")
            reference = job_reference(
                spark, stack, job, base, batch_events, batches, keys, per_event_s
            )
            progress(f"reference: {reference}")
            prefix = f"bench.{tag}.latency"
            live = job_outputs(job_name, base, prefix).model_copy(
                update={"input_topics": [f"bench.{tag}.live"], "watermark": LATENCY_WATERMARK}
            )
            if job_name == "cards":
                progress(f"alert latency: {latency_rate} transactions/s for {latency_s:.0f} s")
                latency = card_alert_latency(
                    spark, stack, live, min(keys, latency_rate * 4), latency_rate, latency_s
                )
            else:
                progress(f"alert latency: {latency_rate} vehicles at 1 Hz for {latency_s:.0f} s")
                latency = alert_latency(spark, stack, live, latency_rate, latency_s)
            progress(f"alert latency: {latency}")
        finally:
            spark.stop()
            with suppress(Exception):  # best effort
                names = admin_client(stack).list_topics(timeout=10).topics
                delete_topics(stack, [t for t in names if tag in t])
    return job_report(job, keys, produced, batch_events, whole, reference, latency, state_mb, rss)


def dir_mb(path: Path) -> float:
    """Size on disk of a folder (a job's checkpoints and state), MB."""
    if not path.exists():
        return 0.0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def job_report(
    job: JobBench,
    keys: int,
    events: int,
    batch: int,
    whole: dict[str, Any],
    reference: Throughput,
    latency: dict[str, Any],
    state_mb: float,
    rss: Mapping[str, float],
) -> BenchReport:
    rate = whole["throughput"].events_per_s
    return BenchReport(
        subject=f"{job.name}: the whole job (all its queries) draining a Kafka topic",
        rate_key="events_per_s",
        rate=rate,
        reference=f"{job.name}'s query logic on Spark's rate-micro-batch source, noop sinks",
        reference_rate=reference.events_per_s,
        latency_ms=latency.get("latency_ms"),
        peak_rss_mb=rss["mb"] or None,
        extra={
            "job": job.name,
            "cores": CORES,
            "keys": keys,
            "events": events,
            "batch_events": batch,
            "wall_s": round(whole["wall_s"], 1),
            "queries_events_per_s": {
                name: round(t.events_per_s, 1) for name, t in whole["queries"].items()
            },
            "job_alerts": whole["alerts"],
            "state_mb": round(state_mb, 1),
            "latency_alerts": latency.get("alerts"),
            "latency_planted": latency.get("planted"),
            "latency_alerted_planted": latency.get("alerted_planted"),
            "latency_watermark": LATENCY_WATERMARK,
            "load_average": [round(x, 2) for x in psutil.getloadavg()],
        },
    )
