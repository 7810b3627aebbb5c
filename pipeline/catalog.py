"""The Spark jobs, by the name `streamsim pipeline run JOB` takes."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener

from core.config import StackConfig
from core.errors import StreamsimError
from core.kafka import ensure_topics
from pipeline.alerts_sink import sink_of
from pipeline.config import PipelineConfig
from pipeline.drain import drain_settled
from pipeline.jobs.cards import job as cards
from pipeline.jobs.sensors import job as sensors
from pipeline.jobs.shipping import job as shipping
from pipeline.jobs.vehicles import job as vehicles
from pipeline.session import spark_session
from pipeline.settings import duration_ms

Job = Callable[[SparkSession, StackConfig, PipelineConfig], list[StreamingQuery]]

JOBS: dict[str, Job] = {
    sensors.NAME: sensors.start,
    cards.NAME: cards.start,
    vehicles.NAME: vehicles.start,
    shipping.NAME: shipping.start,
}


def start_job(
    stack: StackConfig, cfg: PipelineConfig, listener: StreamingQueryListener | None = None
) -> list[StreamingQuery]:
    """Create the job's topics, get the session, register the listener, start the queries."""
    if cfg.job not in JOBS:
        raise StreamsimError(f"unknown job {cfg.job!r}; known jobs: {', '.join(sorted(JOBS))}")
    ensure_topics(stack, [*cfg.input_topics, cfg.output_topic, cfg.deadletter_topic])
    spark = spark_session(stack, app=cfg.job)
    if listener is not None:
        spark.streams.addListener(listener)
    return JOBS[cfg.job](spark, stack, cfg)


def stop_job(
    stack: StackConfig,
    cfg: PipelineConfig,
    queries: list[StreamingQuery],
    listener: StreamingQueryListener | None = None,
) -> None:
    """Stop the queries, close their alert producers while the broker still runs (one left
    open past the broker logs librdkafka's "Connection refused"), and unregister the listener
    `start_job` registered: the session outlives the job in the demo and the tests."""
    for query in queries:
        query.stop()
    for query in queries:
        sink = sink_of(query)
        if sink is not None:
            sink.close()
    if listener is not None:
        spark_session(stack, app=cfg.job).streams.removeListener(listener)


def drain_job(
    queries: list[StreamingQuery],
    stack: StackConfig,
    cfg: PipelineConfig,
    settle_s: float | None = None,
) -> None:
    """Return once the job's queries have processed what their topics hold now.

    `shipping` re-scores a log on a processing-time timer `settle` after its rows stop
    landing, so its alerts query runs a batch every trigger and is never idle: it is drained
    to the topics' end offsets, then given `settle_s` (default: twice its `settle`) for the
    timers. The other jobs' queries are drained once they have read their input and applied
    the watermark it moved (`pipeline.drain.drain_settled`, every query at once)."""
    if cfg.job == shipping.NAME:
        default_s = 2 * duration_ms(cfg.shipping.settle) / 1000
        settle = default_s if settle_s is None else settle_s
        shipping.drain_all(queries, stack, settle)
        return
    drain_settled(queries, stack)
