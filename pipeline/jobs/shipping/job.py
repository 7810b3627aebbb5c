"""Container shipping: per-container histories across ships, ship logs, the shipping rules, and
voyages that land days late.

source: `shipping.positions` (key ship), `shipping.containers` (key box),
        `shipping.port-events` (key port), a Kafka source per topic (one source for all three
        would be scanned once per kind, each record read three times per batch)
  -> parse each record once with its topic's schema; malformed -> dead-letter topic
  -> route (`logs.route_key`): a reading to its box's log and, while aboard, its ship's log;
     positions and port events to their ship's log
  -> per log, `applyInPandasWithState` in processing time (`log_rules`): keep
     `history` of event time, re-run the `detectors.shipping` rules over it once the log has
     been quiet for `settle`, raise the alerts not raised before
                                                  -> `alerts` topic + `<lake>/alerts/shipping/`
     each with `late` and `late_by_ms`; rows older than `history` are dropped and counted
                                                  -> `metrics` (query `shipping.late-drops`)

Why not Spark's event-time watermark: a ship at sea holds its log and flushes the voyage in
port, days late, in bulk, while the satellite slice and the shore keep the stream's event time
current; a global watermark short enough for the live data would drop every voyage, one long
enough would hold every alert for days. So lateness is judged per log: the job's `watermark`
is the live horizon (an alert further behind its log's newest event is `late: true`, with the
delay), and a voyage that lands is the backfill, re-scored whole. Queries:
`shipping.deadletter` (stateless) and `shipping.alerts` (state per log, micro-batch).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import reduce
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.state import GroupState
from pyspark.sql.types import StructType

from core.config import StackConfig
from core.contracts import topics
from core.contracts.events import SHIPPING_CONTAINER, SHIPPING_PORT_EVENT, SHIPPING_POSITION
from core.errors import StreamsimError
from core.kafka import ensure_topics
from detectors import ALERT_COLUMNS, ALERT_SPARK_DDL, alerts_to_frame
from pipeline.config import PipelineConfig
from pipeline.drain import drain_queries
from pipeline.group_state import STATE_DDL, GroupStateFn
from pipeline.jobs.shipping.config import offsets_by_topic, per_topic_cap, topics_by_kind
from pipeline.jobs.shipping.logs import KINDS, EntityLog, Scored
from pipeline.kafka_io import deadletter_records, parse_events, read_kafka, write_kafka
from pipeline.late_drops import DROPPED, QUERY_SUFFIX, counting_sink, with_drops
from pipeline.session import scheduler_pool, use_rocksdb_state
from pipeline.settings import duration_ms
from pipeline.triggers import output_mode, query_trigger, start_query

NAME = "shipping"
ALERTS_QUERY = f"{NAME}.alerts"
DEADLETTER_QUERY = f"{NAME}.deadletter"
DROPS_QUERY = f"{NAME}{QUERY_SUFFIX}"  # the metrics records of the late drops
#: Each input topic: the kind of row, its schema, and the fields a record must have.
SOURCES: dict[str, tuple[str, StructType, tuple[str, ...]]] = {
    topics.SHIPPING_CONTAINERS.name: (
        "container", SHIPPING_CONTAINER.spark_schema(), ("container_id",)
    ),
    topics.SHIPPING_POSITIONS.name: ("position", SHIPPING_POSITION.spark_schema(), ("ship_id",)),
    topics.SHIPPING_PORT_EVENTS.name: (
        "port_event", SHIPPING_PORT_EVENT.spark_schema(), ("event", "ship_id")
    ),
}  # fmt: skip
#: The routed rows' columns: every kind's (`logs.KINDS`), null where a kind has none, and
#: `channel` (`onboard`: held at sea and flushed in port, i.e. backfill; see `next_timer`).
ROW_COLUMNS = tuple(dict.fromkeys([*(c for cols in KINDS.values() for c in cols), "channel"]))
#: The processor's output: alert rows, plus rows counting late drops (alert_id null).
OUTPUT_DDL = f"{ALERT_SPARK_DDL}, late BOOLEAN, late_by_ms BIGINT, {DROPPED} BIGINT"
CARRY = ("late", "late_by_ms", DROPPED)  # `LateDrops` takes `dropped` out again


def _column_types() -> dict[str, str]:
    types: dict[str, str] = {}
    for _kind, schema, _required in SOURCES.values():
        for f in schema.fields:
            types.setdefault(f.name, f.dataType.simpleString())
    return types


def routed(events: DataFrame, kind: str) -> DataFrame:
    """One kind's events as the processor's rows: `key` (the log, one row per log it goes
    to), `kind`, and `ROW_COLUMNS` (null where the kind has none)."""
    types = _column_types()
    present = set(events.columns)
    cols: list[Column] = [
        (F.col(c) if c in present else F.lit(None)).cast(types[c]).alias(c) for c in ROW_COLUMNS
    ]
    box = F.concat(F.lit("c:"), F.col("container_id"))
    ship = F.concat(F.lit("s:"), F.col("ship_id"))
    if kind == "container":
        keys = F.when(F.col("ship_id").isNull(), F.array(box)).otherwise(F.array(box, ship))
    else:
        keys = F.array(ship)
    return events.select(F.explode(keys).alias("key"), F.lit(kind).alias("kind"), *cols)


def rows_stream(events: dict[str, DataFrame]) -> DataFrame:
    """Every kind's routed rows, one stream."""
    frames = [routed(events[topic], SOURCES[topic][0]) for topic in SOURCES]
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def log_rules(watermark_ms: int, history_ms: int, settle_ms: int) -> GroupStateFn:
    """The `applyInPandasWithState` function (timeout conf ProcessingTimeTimeout): an
    `EntityLog` per key (see `logs`), rows pushed as they land, the rules re-run once backfill
    has stopped landing for `settle_ms` of processing time (at once when 0; live rows do not
    put it off: `EntityLog.next_timer`), and before the history horizon would cut rows that
    landed since the last scoring.

    A key's timeout is its log's `timer_ms`. Spark calls a timed-out key only in a batch that
    brings it no rows, so a call with rows also scores when the timer is due: a ship whose
    positions land every batch is still scored `settle_ms` after its voyage landed."""

    def apply(
        key: Any, frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        stored = state.getOption
        name = str(key[0])
        log = EntityLog(name) if stored is None else EntityLog.from_bytes(name, bytes(stored[0]))
        now = state.getCurrentProcessingTimeMs()
        scored: list[Scored] = []
        dropped = 0
        if not state.hasTimedOut:
            frame = pd.concat(list(frames), ignore_index=True)
            scored, dropped = log.land(frame, now, history_ms, settle_ms, watermark_ms)
        if log.timer_ms is not None and log.timer_ms <= now:
            log.timer_ms = None
            scored += log.score(watermark_ms) if log.dirty else []
        state.update((log.to_bytes(),))
        if log.timer_ms is not None:
            state.setTimeoutDuration(log.timer_ms - now)
        return output(scored, dropped)

    return apply


def alerts_stream(events: dict[str, DataFrame], cfg: PipelineConfig) -> DataFrame:
    """Every kind's rows routed to their logs, `log_rules` per log: `OUTPUT_DDL` rows."""
    settings = cfg.shipping
    rules = log_rules(
        duration_ms(cfg.watermark), duration_ms(settings.history), duration_ms(settings.settle)
    )
    return (
        rows_stream(events)
        .groupBy("key")
        .applyInPandasWithState(rules, OUTPUT_DDL, STATE_DDL, "append", "ProcessingTimeTimeout")
    )


def output(scored: list[Scored], dropped: int) -> Iterator[pd.DataFrame]:
    """The processor's rows (`OUTPUT_DDL`): the alerts, then a drop count if any.

    >>> next(output([], 3))[["alert_id", "dropped"]].to_dict("records")
    [{'alert_id': None, 'dropped': 3}]
    """
    alerts = None
    if scored:
        alerts = alerts_to_frame([s.alert for s in scored]).loc[:, list(ALERT_COLUMNS)]
        flags = {s.alert.alert_id: s for s in scored}
        alerts["late"] = [flags[i].late for i in alerts["alert_id"]]
        alerts["late_by_ms"] = [flags[i].late_by_ms for i in alerts["alert_id"]]
    return iter(with_drops(alerts, dropped, extra=("late", "late_by_ms")))


def drain(query: StreamingQuery, stack: StackConfig, settle_s: float, timeout_s: float) -> None:
    """Wait until `query` has read its topics to their end offsets now (`pipeline.drain`),
    then for `settle_s` and two more batches: by then the logs' settle timeouts have fired and
    their alerts are written. (`processAllAvailable` never returns here: processing-time
    timeouts make the query run a batch every trigger, data or not, so it is never idle.)"""
    drain_queries([query], stack, timeout_s)
    deadline = time.monotonic() + timeout_s

    def batch_id() -> int:
        if query.exception() is not None:
            raise StreamsimError(f"query {query.name} failed: {query.exception()}")
        if time.monotonic() > deadline:
            raise StreamsimError(f"query {query.name} did not drain in {timeout_s:.0f}s")
        progress = query.lastProgress
        return -1 if not progress else int(progress["batchId"])

    time.sleep(settle_s)
    last = batch_id()
    while batch_id() < last + 2:
        time.sleep(0.2)


def drain_all(
    queries: list[StreamingQuery], stack: StackConfig, settle_s: float, timeout_s: float = 600.0
) -> None:
    """The job's queries to the end of their input: the alerts query by `drain`, then the
    others (`pipeline.drain`)."""
    alerts = [q for q in queries if q.name == ALERTS_QUERY]
    for query in alerts:
        drain(query, stack, settle_s, timeout_s)
    drain_queries([q for q in queries if q not in alerts], stack, timeout_s)


def check_sources(checkpoint: Path) -> None:
    """Refuse, saying what to do, a checkpoint of a query with another number of sources (one
    from before the job read each topic with a source of its own): Spark would stop with
    "There are [1] sources in the checkpoint offsets and now there are [3] sources ..."."""
    offsets = checkpoint / "offsets"
    planned = (
        sorted(int(p.name) for p in offsets.iterdir() if p.name.isdigit())
        if offsets.is_dir()
        else []
    )
    if not planned:
        return
    lines = (offsets / str(planned[-1])).read_text(encoding="utf-8").splitlines()
    if len(lines) - 2 != len(SOURCES):  # `v1`, the batch metadata, then a line per source
        raise StreamsimError(
            f"checkpoint {checkpoint} has {len(lines) - 2} Kafka source(s); job {NAME} reads "
            f"a source per input topic ({len(SOURCES)}). Delete {checkpoint.parent} to start "
            "over from starting_offsets (alerts already in the lake are not written again)"
        )


def start(spark: SparkSession, stack: StackConfig, cfg: PipelineConfig) -> list[StreamingQuery]:
    checkpoints = stack.dirs.checkpoints / NAME
    for query in ("deadletter", "alerts"):
        check_sources(checkpoints / query)
    ensure_topics(stack, [cfg.output_topic, cfg.deadletter_topic])
    use_rocksdb_state(spark)

    by_kind = topics_by_kind(cfg.input_topics)
    starting = offsets_by_topic(cfg.starting_offsets, cfg.input_topics)
    cap = per_topic_cap(cfg.max_offsets_per_trigger)
    events: dict[str, DataFrame] = {}
    rejects: list[DataFrame] = []
    for topic, (_kind, schema, required) in SOURCES.items():
        name = by_kind[topic]
        raw = read_kafka(spark, stack, [name], starting[name], cap)
        events[topic], bad = parse_events(raw, schema, required)
        rejects.append(bad)
    bad_rows = reduce(DataFrame.unionByName, rejects)

    stateless = query_trigger(cfg.trigger, stateful=True)  # micro-batches beside the alerts
    deadletter = write_kafka(
        deadletter_records(bad_rows, NAME),
        stack,
        cfg.deadletter_topic,
        str(checkpoints / "deadletter"),
        output_mode(stateless),
    )
    alerts_checkpoint = checkpoints / "alerts"
    sink = counting_sink(stack, cfg.output_topic, NAME, alerts_checkpoint, carry=CARRY)
    alerts = (
        alerts_stream(events, cfg)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(alerts_checkpoint))
        .outputMode("append")
    )
    trigger = query_trigger(cfg.trigger, stateful=True)
    with scheduler_pool(spark, "alerts"):
        main = start_query(alerts, ALERTS_QUERY, trigger)
        first = start_query(deadletter, DEADLETTER_QUERY, stateless)
    return [main, first]
