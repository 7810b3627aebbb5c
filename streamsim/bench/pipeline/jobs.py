"""`bench pipeline --job JOB`: a whole job draining Kafka against two references, same run.

Method (one Spark session, `local[2]`, shuffle partitions = 2):

1. **Input.** The job's scenario sends `events` at `--speed max` into fresh two-partition
   topics (one per kind of event the job reads: shipping reads three).
2. **Subject: the whole job** (`start()` of the job's module, every query, AvailableNow) drains
   them in batches of `batch_events`: `sustained` events/s over all its queries. It drains
   them twice, with fresh checkpoints and outputs: the first run warms the JVM (class loading
   and JIT compilation cost a cold job about 50 CPU s on these cores, more than its first
   batch, which `sustained` leaves out), and is reported as `cold_events_per_s`; the second
   is the figure. The references below run in the same warm JVM.
3. **Reference: the job's logic on `rate-micro-batch`** (its stateful queries on rows shaped
   like its input, noop sinks): what Kafka, JSON and the sinks cost (`ratio`).
4. **Floor: Kafka read + parse + one window** (`floor`): the same topics read with the job's
   schemas, a watermark and one 1-minute tumbling count per key, noop sink, AvailableNow: the
   engine's floor for this input (`floor_ratio` = job / floor; the issue's target is >= 0.5).
5. **Alert latency** where the job has a paced phase (cards, vehicles; see `latency`).

Each job is a `JobBench`: its scenario, config, module, input kinds and logic as data.
`bench pipeline --job JOB --pipeline FILE` benches the job under another pipeline YAML (e.g.
one with `cards.rules_form: engine`) instead of its own.
"""

from __future__ import annotations

import importlib
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from core.config import StackConfig
from core.errors import StreamsimError
from core.kafka import ensure_topics
from core.kafka.admin import admin_client, delete_topics
from streamsim.bench.pipeline.floor import FLOOR_WINDOW, floor_drain, tumbling_counts
from streamsim.bench.pipeline.latency import (
    LATENCY_WATERMARK,
    alert_latency,
    card_alert_latency,
)
from streamsim.bench.pipeline.measure import (
    Throughput,
    dir_mb,
    sustained,
    throughput,
    with_input,
)
from streamsim.bench.pipeline.rss import peak_rss
from streamsim.bench.pipeline.settings import (
    CORES,
    PIPELINE,
    SCENARIO,
    Progress,
    bench_stack,
    job_config,
    own_checkpoints,
)
from streamsim.bench.pipeline.topics import (
    event_time_rate,
    produce_input,
    produce_kinds,
    topic_size,
)
from streamsim.bench.report import BenchReport


@dataclass(frozen=True)
class Source:
    """One kind of event a job reads: its topic (the scenario's name for it), schema, the
    fields a record must have, and its key."""

    topic: str
    schema: Any
    required: tuple[str, ...]
    entity: str


#: A job's stateful logic on parsed events from any source: (module, events by source topic,
#: config) -> streams by query name.
Streams = Callable[[Any, Mapping[str, Any], Any], dict[str, Any]]
#: The alert latency phase: (spark, stack, config reading its live topic, keys, rate, seconds).
Latency = Callable[[Any, StackConfig, Any, int, int, float], dict[str, Any]]


@dataclass(frozen=True)
class JobBench:
    """What `bench pipeline --job` needs of a job."""

    name: str
    scenario: Path
    pipeline: Path
    module: str  # import path of the job's module (`start`, schemas)
    default_keys: int
    sources: Callable[[Any, Any], list[Source]]  # (module, config) -> its input kinds
    streams: Streams
    outputs: Callable[[Any, str], Any]  # (config, prefix) -> its outputs named under prefix
    settings: str | None = None  # the section whose `deadletter_trigger` must drain too
    kinds: dict[str, str] = field(default_factory=dict)  # schema id -> source topic (several)
    latency: Latency | None = None
    state: Callable[[Any, Any], None] | None = None  # (spark, config): its state store
    #: A job that cannot run AvailableNow (shipping: processing-time timers keep its alerts
    #: query running) drains in micro-batches: (module, queries, stack, config) returns once
    #: its queries have read their input to its end.
    drain: Callable[[Any, list[Any], StackConfig, Any], None] | None = None
    #: Where its alerts go, when not its `output_topic` (sensors: that is the counts').
    alerts_topic: Callable[[Any], str] | None = None

    def job(self) -> Any:
        return importlib.import_module(self.module)

    @property
    def entity(self) -> str:
        """The key field of its first kind of event (card_token, vehicle_id, sensor_id)."""
        return self.sources(self.job(), None)[0].entity


# -- each job's parts -----------------------------------------------------------------------


def outputs_under(cfg: Any, prefix: str, **update: Any) -> Any:
    """`cfg` writing its alerts and dead letters to `<prefix>.alerts`, `<prefix>.deadletter`."""
    return cfg.model_copy(
        update={
            "output_topic": f"{prefix}.alerts",
            "deadletter_topic": f"{prefix}.deadletter",
            **update,
        }
    )


def card_outputs(cfg: Any, prefix: str) -> Any:
    """No profiles: the bench's input, events and rates are the transactions alone; no
    sketches query, no compromised-cards query."""
    settings = cfg.cards.model_copy(
        update={
            "features_topic": f"{prefix}.card-features",
            "profiles_topic": None,
            # the sketches query reads the topic once more (docs/sketches.md): off
            "sketches": cfg.cards.sketches.model_copy(update={"enabled": False}),
            "compromised_cards_topic": None,  # nor the Bloom filters' query
        }
    )
    return outputs_under(cfg, prefix, cards=settings)


def sensor_outputs(cfg: Any, prefix: str) -> Any:
    """The counts to `<prefix>.alerts` (its output topic), the sensor alerts on, to
    `<prefix>.sensor-alerts`."""
    settings = cfg.sensors.model_copy(
        update={"sensor_alerts": True, "alerts_topic": f"{prefix}.sensor-alerts"}
    )
    return outputs_under(cfg, prefix, sensors=settings)


def one_source(schema: str, required: str, entity: Callable[[Any], str]) -> Any:
    def sources(module: Any, cfg: Any) -> list[Source]:
        return [Source("input", getattr(module, schema), getattr(module, required), entity(cfg))]

    return sources


def sensor_sources(module: Any, cfg: Any) -> list[Source]:
    """The job's schema with the rules' fields (alerts on), keyed by its `entity_key`."""
    key = "sensor_id" if cfg is None else cfg.entity_key
    return [Source("input", module.event_schema(key, True), (key,), key)]


#: Shipping: each kind's key field (the record key the scenario gives it).
SHIPPING_KEYS = {"container": "container_id", "position": "ship_id", "port_event": "ship_id"}


def shipping_sources(module: Any, _cfg: Any) -> list[Source]:
    return [
        Source(topic, schema, tuple(required), SHIPPING_KEYS[kind])
        for topic, (kind, schema, required) in module.SOURCES.items()
    ]


def card_streams(module: Any, events: Mapping[str, Any], cfg: Any) -> dict[str, Any]:
    streams: dict[str, Any] = module.logic_streams(events["input"], cfg)
    return streams


def vehicle_streams(module: Any, events: Mapping[str, Any], cfg: Any) -> dict[str, Any]:
    readings = events["input"]
    return {
        "stats": module.stats_stream(readings, cfg),
        "trips": module.trips_stream(readings, cfg),
        "alerts": module.alerts_stream(readings, cfg.vehicles, cfg.watermark),
    }


def sensor_streams(module: Any, events: Mapping[str, Any], cfg: Any) -> dict[str, Any]:
    """Its counts (a window count per sensor) and its alerts queries (the sensor rules); no
    counts query where the job's alerts query counts too (`shared_counts_ms`)."""
    readings = events["input"]
    alerting = sensor_outputs(cfg, "reference")
    alerts = module.alerts_streams(readings, alerting)
    if module.shared_counts_ms(alerting) is not None:
        return alerts
    return {
        "counts": tumbling_counts(readings, cfg.entity_key, cfg.watermark, cfg.window),
        **alerts,
    }


def shipping_streams(module: Any, events: Mapping[str, Any], cfg: Any) -> dict[str, Any]:
    """Its alerts query's operator: every kind's rows routed to their logs, the rules per log
    (processing-time timeouts), as `start` builds it."""
    return {"alerts": module.alerts_stream(dict(events), cfg)}


def shipping_drain(module: Any, queries: list[Any], stack: StackConfig, cfg: Any) -> None:
    """The job's own `drain_all` to the input's end offsets (no settle: throughput only)."""
    module.drain_all(queries, stack, 0.0, 1800.0)


def card_state(spark: Any, cfg: Any) -> None:
    from pipeline.session import use_state_store

    use_state_store(spark, cfg.cards.state_store)


def card_latency(
    spark: Any, stack: StackConfig, cfg: Any, keys: int, rate: int, seconds: float
) -> dict[str, Any]:
    return card_alert_latency(spark, stack, cfg, min(keys, rate * 4), rate, seconds)


def vehicle_latency(
    spark: Any, stack: StackConfig, cfg: Any, _keys: int, rate: int, seconds: float
) -> dict[str, Any]:
    return alert_latency(spark, stack, cfg, rate, seconds)


def vehicle_outputs(cfg: Any, prefix: str) -> Any:
    return job_config(cfg, prefix, cfg.input_topics)


JOBS = {
    "cards": JobBench(
        "cards",
        Path("config/scenarios/cards.yaml"),
        Path("config/pipelines/cards.yaml"),
        "pipeline.jobs.cards.job",
        20_000,
        one_source("TRANSACTION_SCHEMA", "REQUIRED", lambda _: "card_token"),
        card_streams,
        card_outputs,
        settings="cards",
        latency=card_latency,
        state=card_state,
    ),
    "vehicles": JobBench(
        "vehicles",
        SCENARIO,
        PIPELINE,
        "pipeline.jobs.vehicles.job",
        2_000,
        one_source("VEHICLE_SCHEMA", "REQUIRED", lambda _: "vehicle_id"),
        vehicle_streams,
        vehicle_outputs,
        settings="vehicles",
        latency=vehicle_latency,
    ),
    "sensors": JobBench(
        "sensors",
        Path("config/scenarios/sensors.yaml"),
        Path("config/pipelines/sensors.yaml"),
        "pipeline.jobs.sensors.job",
        2_000,  # 100 readings each over 10 minutes: the rules' windows close and judge
        sensor_sources,
        sensor_streams,
        sensor_outputs,
        alerts_topic=lambda cfg: cfg.sensors.alerts_topic,
    ),
    "shipping": JobBench(
        "shipping",
        Path("config/scenarios/shipping.yaml"),
        Path("config/pipelines/shipping.yaml"),
        "pipeline.jobs.shipping.job",
        10_054,
        shipping_sources,
        shipping_streams,
        outputs_under,
        kinds={
            "shipping.position": "shipping.positions",
            "shipping.container": "shipping.containers",
            "shipping.port-event": "shipping.port-events",
        },
        drain=shipping_drain,
    ),
}


def job_module(name: str) -> Any:
    return JOBS[name].job()


def job_schema(name: str) -> Any:
    """The schema of the job's (first) kind of event."""
    job = JOBS[name]
    return job.sources(job.job(), None)[0].schema


def job_outputs(name: str, cfg: Any, prefix: str) -> Any:
    """`cfg` with every output topic named `<prefix>.<output>`."""
    return JOBS[name].outputs(cfg, prefix)


def input_topics(job: JobBench, prefix: str) -> list[str]:
    """The bench's input topics of `job`: `prefix`, or `<prefix>.<kind topic>` per kind (a
    name the job maps to its kind, as MirrorMaker's `port.shipping.positions`)."""
    return [f"{prefix}.{topic}" for topic in job.kinds.values()] if job.kinds else [prefix]


def input_sources(job: JobBench, cfg: Any) -> list[Source]:
    """The job's kinds of event, each on its bench input topic in `cfg.input_topics`."""
    sources = job.sources(job.job(), cfg)
    if not job.kinds:
        return [Source(cfg.input_topics[0], s.schema, s.required, s.entity) for s in sources]
    by_kind = {s.topic: s for s in sources}
    out = []
    for topic in cfg.input_topics:
        kind = next(k for k in by_kind if topic == k or topic.endswith(f".{k}"))
        s = by_kind[kind]
        out.append(Source(topic, s.schema, s.required, s.entity))
    return out


def job_draining(name: str, base: Any, prefix: str, topic: str | list[str], batch: int) -> Any:
    """The whole job reading `topic` (or topics) to its end in batches of `batch` events, then
    stopping."""
    job = JOBS[name]
    once = base.trigger.model_copy(update={"mode": "available_now"})
    if job.drain is not None:  # micro-batches, back to back
        once = base.trigger.model_copy(update={"mode": "microbatch", "interval": "0 seconds"})
    cfg = job.outputs(base, prefix).model_copy(
        update={
            "input_topics": [topic] if isinstance(topic, str) else list(topic),
            "trigger": once,
            "max_offsets_per_trigger": batch,
        }
    )
    if job.settings is None:
        return cfg
    settings = getattr(cfg, job.settings).model_copy(update={"deadletter_trigger": once})
    return cfg.model_copy(update={job.settings: settings})


def whole_job_drain(spark: Any, stack: StackConfig, name: str, cfg: Any) -> dict[str, Any]:
    """Every query of the job (its module's `start`) draining its input (AvailableNow);
    `sustained` over them."""
    job, module = JOBS[name], job_module(name)
    ensure_topics(stack, [cfg.output_topic, cfg.deadletter_topic])  # not every job does
    started = time.monotonic()
    queries = module.start(spark, own_checkpoints(stack, cfg.output_topic), cfg)
    try:
        if job.drain is not None:
            job.drain(module, queries, stack, cfg)
        for query in queries:
            if job.drain is not None:
                query.stop()
            query.awaitTermination()
    finally:
        for query in queries:
            query.stop()
    wall = time.monotonic() - started
    failed = [f"{q.name}: {q.exception()}" for q in queries if q.exception() is not None]
    if failed:
        raise StreamsimError(f"job {name} failed: {failed}")
    events = sum(topic_size(stack, t) for t in cfg.input_topics)
    progress = {str(q.name): list(q.recentProgress) for q in queries}
    return {
        "throughput": sustained(progress, events),
        "wall_s": wall,
        "events": events,
        "queries": {n: throughput(p, wall) for n, p in progress.items()},
        "batches": {n: len(with_input(p)) for n, p in progress.items()},
        "alerts": topic_size(stack, (job.alerts_topic or outputs_topic)(cfg)),
    }


def outputs_topic(cfg: Any) -> str:
    return str(cfg.output_topic)


# -- the rate-source reference ----------------------------------------------------------------


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
    for i, field_ in enumerate(schema.fields):
        name = field_.name
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
        elif isinstance(field_.dataType, DoubleType):
            value = 100 + (n % (7 + i)) * 0.5
        elif isinstance(field_.dataType, LongType):
            value = n
        elif isinstance(field_.dataType, BooleanType):
            value = F.lit(True)
        else:
            value = F.concat(F.lit(f"{name}-"), (n % 7).cast("string"))
        columns.append(value.cast(field_.dataType).alias(name))
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
    """The job's queries' logic on `rate-micro-batch` (`batch` rows a batch, split evenly
    over its kinds of event) into `noop`, all at once as in the job, for `batches` batches
    each; `sustained` over them."""
    from pipeline.session import use_rocksdb_state

    if job.state is not None:  # as the job
        job.state(spark, cfg)
    else:
        use_rocksdb_state(spark)
    module = job.job()
    sources = job.sources(module, cfg)
    rows = max(1, batch // len(sources))
    events = {
        s.topic: rate_events(spark, s.schema, s.entity, rows, keys, per_event_s / len(sources))
        for s in sources
    }
    queries = [
        stream.writeStream.format("noop")
        .queryName(f"reference.{name}")
        .option("checkpointLocation", str(stack.dirs.checkpoints / f"reference-{uuid.uuid4()}"))
        .start()
        for name, stream in job.streams(module, events, cfg).items()
    ]
    try:
        while any(q.isActive and len(with_input(q.recentProgress)) < batches for q in queries):
            time.sleep(0.5)
    finally:
        for query in queries:
            query.stop()
    progress = {str(q.name): with_input(q.recentProgress)[:batches] for q in queries}
    return sustained(progress, rows * len(sources) * batches)


# -- the run ----------------------------------------------------------------------------------


def bench_job(
    stack: StackConfig,
    job_name: str,
    events: int = 200_000,
    batch_events: int = 50_000,
    keys: int | None = None,
    latency_s: float = 60.0,
    latency_rate: int = 500,
    progress: Progress = lambda _: None,
    pipeline: Path | None = None,
) -> BenchReport:
    """`bench pipeline --job JOB`: see the module docstring; `pipeline`: another config of the
    job to bench (`pipeline_config`)."""
    from pipeline.session import spark_session

    job = JOBS[job_name]
    keys = keys or job.default_keys
    if events < 2 * batch_events:
        raise StreamsimError("events must be at least two batches (the first is warm-up)")
    base = pipeline_config(job_name, pipeline)
    tag = uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory(prefix="streamsim-bench-job-") as tmp, peak_rss() as rss:
        stack = bench_stack(stack, Path(tmp))
        spark = spark_session(stack, app="bench-pipeline")
        try:
            topics = input_topics(job, f"bench.{tag}.input")
            progress(f"simulating {events:,} {job_name} events ({keys:,} keys) into {topics}")
            produced = produce_job_input(stack, Path(tmp), job, topics, events, keys, tag)
            per_event_s = event_time_rate(stack, topics)
            progress(f"warm-up: the whole job draining {produced:,} events, a cold JVM")
            warmup = job_draining(job_name, base, f"bench.{tag}.warmup", topics, batch_events)
            cold = whole_job_drain(spark, stack, job_name, warmup)["throughput"]
            progress(f"warm-up: {cold}")
            progress(f"the whole job draining {produced:,} events again, warm")
            drain = job_draining(job_name, base, f"bench.{tag}.job", topics, batch_events)
            whole = {**whole_job_drain(spark, stack, job_name, drain), "cold": cold}
            progress(f"whole job: {whole['throughput']}; per query {whole['queries']}")
            state_mb = dir_mb(stack.dirs.checkpoints / drain.output_topic)
            batches = max(4, min(8, max(whole["batches"].values(), default=4)))
            progress(f"reference: the job's logic on rate-micro-batch, {batches} batches")
            reference = job_reference(
                spark, stack, job, drain, batch_events, batches, keys, per_event_s
            )
            progress(f"reference: {reference}")
            progress(f"floor: Kafka read + parse + one {FLOOR_WINDOW} window, {produced:,} events")
            floor = floor_drain(spark, stack, input_sources(job, drain), drain, f"floor.{tag}")
            progress(f"floor: {floor}")
            latency: dict[str, Any] = {}
            if job.latency is not None:
                prefix = f"bench.{tag}.latency"
                live = job.outputs(base, prefix).model_copy(
                    update={"input_topics": [f"bench.{tag}.live"], "watermark": LATENCY_WATERMARK}
                )
                progress(f"alert latency: {latency_rate}/s for {latency_s:.0f} s")
                latency = job.latency(spark, stack, live, keys, latency_rate, latency_s)
                progress(f"alert latency: {latency}")
        finally:
            spark.stop()
            with suppress(Exception):  # best effort
                names = admin_client(stack).list_topics(timeout=10).topics
                delete_topics(stack, [t for t in names if tag in t])
    return job_report(
        job, keys, produced, batch_events, whole, reference, latency, state_mb, rss, floor
    )


def pipeline_config(job_name: str, pipeline: Path | None) -> Any:
    """The job's PipelineConfig: `pipeline` when given (its `job` must be the benched one),
    else the job's own YAML."""
    from core.config import load_model
    from pipeline.config import PipelineConfig

    cfg = load_model(PipelineConfig, pipeline or JOBS[job_name].pipeline)
    if cfg.job != job_name:
        raise StreamsimError(f"{pipeline}: its job is {cfg.job!r}, not the benched {job_name!r}")
    return cfg


def produce_job_input(
    stack: StackConfig,
    work: Path,
    job: JobBench,
    topics: list[str],
    events: int,
    keys: int,
    tag: str,
) -> int:
    """The job's scenario into `topics` (see `input_topics`); the events sent."""
    name = f"bench_{job.name}_{tag}"
    if not job.kinds:
        return produce_input(stack, work, topics[0], events, keys, name, job.scenario)
    sources = {s.topic: s for s in job.sources(job.job(), None)}
    routes = {
        schema: (next(t for t in topics if t.endswith(f".{kind}")), sources[kind].entity)
        for schema, kind in job.kinds.items()
    }
    return produce_kinds(stack, work, routes, events, keys, name, job.scenario)


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
    floor: Throughput | None = None,
) -> BenchReport:
    rate = whole["throughput"].events_per_s
    floor_rate = floor.events_per_s if floor is not None else None
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
            **(
                {"cold_events_per_s": round(whole["cold"].events_per_s, 1)}
                if "cold" in whole
                else {}
            ),
            "queries_events_per_s": {
                name: round(t.events_per_s, 1) for name, t in whole["queries"].items()
            },
            "job_alerts": whole["alerts"],
            "state_mb": round(state_mb, 1),
            **(
                {}
                if floor is None
                else {
                    "floor": f"Kafka read + parse + one {FLOOR_WINDOW} tumbling window count "
                    "per key on the same topics, noop sink",
                    "floor_rate": round(floor.events_per_s, 1),
                    "floor_events": floor.events,
                    "floor_ratio": round(rate / floor_rate, 3) if floor_rate else 0.0,
                    "floor_target": 0.5,
                }
            ),
            **(
                {
                    "latency_alerts": latency.get("alerts"),
                    "latency_planted": latency.get("planted"),
                    "latency_alerted_planted": latency.get("alerted_planted"),
                    "latency_watermark": LATENCY_WATERMARK,
                }
                if latency
                else {}
            ),
            "load_average": [round(x, 2) for x in psutil.getloadavg()],
        },
    )
