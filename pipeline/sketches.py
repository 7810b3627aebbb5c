"""Count-Min heavy hitters and HyperLogLog distinct counts per tumbling window (issue 35).

Input: rows `(event_ts, kind, key, item)`: `kind` names what is counted (`terminal`,
`merchant`, `device`, ...), `key` the entity, `item` what its distinct count counts (the
card at a terminal, the device at a site; null: no distinct count for that kind).

Per micro-batch (`SketchState.add`), Spark computes:
- per window and kind, `count_min_sketch(key, eps, confidence, seed)` and the item count N;
- per window and kind, the batch's `candidates` busiest keys (exact within the batch: a
  batch is bounded, so this holds no state);
- per window, kind and key with an item, `hll_sketch_agg(item, lgConfigK)`.

The driver keeps each open window's Count-Min sketch (merged with Spark's own
`CountMinSketch.mergeInPlace` through the JVM: a merge is exact, counters add) and its
tracked keys (the batch's busiest join them; estimates rank them; the lowest beyond
`candidates` drop out), and each open window's HyperLogLog sketches, which Spark merges
(`hll_union_agg`) with the next batch's. A window closes when the newest event time seen less
the job's watermark delay passes its end: its `top` keys by estimate are the heavy hitters
(`heavy_records`), its sketches' estimates the distinct counts (`distinct_records`).

Why candidates from the batches: a Count-Min sketch answers "how many of key k" but cannot
list its keys; an exact per-window count per key (state growing with the key space) is what
it replaces. A key that is heavy over the window is among the busiest in some batch unless
its items spread thinly over many batches; the tracked set carries keys between batches.
Memory: per open window and kind `width * depth` longs, `candidates` keys; per open window
and keyed item one HyperLogLog sketch (at most about 2^lgConfigK / 2 bytes, HLL_4).

The state lives in the driver, not in a checkpoint: a restarted query starts its open
windows afresh (their earlier batches are not re-read), so a window open across a restart is
published with fewer items than it had.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from core.config import StackConfig
from core.kafka import ensure_topics
from detectors.sketches import CountMinParams, HllParams, SketchParams, count_min_bound
from pipeline.kafka_io import kafka_options
from pipeline.settings import duration_ms
from pipeline.sketch_settings import SketchSettings
from pipeline.triggers import start_query

#: The input rows' columns.
ROW_COLUMNS = ("event_ts", "kind", "key", "item")
#: The query's name suffix: `<job>.sketches`.
QUERY_SUFFIX = "sketches"


def sketch_rows(events: DataFrame, kinds: Mapping[str, tuple[Column, Column | None]]) -> DataFrame:
    """`events` (with `event_ts`) as one row per kind: kind -> (key, item or None)."""
    structs = [
        F.struct(
            F.lit(kind).alias("kind"),
            key.cast("string").alias("key"),
            (F.lit(None) if item is None else item).cast("string").alias("item"),
        )
        for kind, (key, item) in kinds.items()
    ]
    exploded = events.select("event_ts", F.explode(F.array(*structs)).alias("s"))
    return exploded.select("event_ts", "s.kind", "s.key", "s.item").where(F.col("key").isNotNull())


def windowed(rows: DataFrame, window: str) -> DataFrame:
    """`rows` with `window_start` (epoch ms) of their tumbling window."""
    w = F.window("event_ts", window)
    return rows.withColumn("window_start", F.unix_millis(w.start)).drop("event_ts")


def count_min_sketches(rows: DataFrame, params: CountMinParams) -> DataFrame:
    """Per window and kind: `n` items and `sketch` (Spark's Count-Min, serialized)."""
    return rows.groupBy("window_start", "kind").agg(
        F.count(F.lit(1)).alias("n"),
        F.count_min_sketch(
            F.col("key"), F.lit(params.eps), F.lit(params.confidence), F.lit(params.seed)
        ).alias("sketch"),
    )


def busiest(rows: DataFrame, candidates: int) -> DataFrame:
    """Per window and kind, the `candidates` keys with the most rows (exact, in `rows`)."""
    counts = rows.groupBy("window_start", "kind", "key").count()
    rank = F.row_number().over(
        Window.partitionBy("window_start", "kind").orderBy(F.desc("count"), "key")
    )
    return counts.withColumn("rank", rank).where(F.col("rank") <= candidates).drop("rank")


def hll_sketches(rows: DataFrame, params: HllParams) -> DataFrame:
    """Per window, kind and key with items: `sketch` (DataSketches HLL of the items)."""
    return (
        rows.where(F.col("item").isNotNull())
        .groupBy("window_start", "kind", "key")
        .agg(F.hll_sketch_agg("item", params.lg_config_k).alias("sketch"))
    )


@dataclass
class _Window:
    n: int
    sketch: Any  # org.apache.spark.util.sketch.CountMinSketch (a py4j proxy)
    tracked: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Closed:
    """A closed window of one kind: its items, Count-Min sketch and tracked keys' estimates
    (highest first), and its keys' distinct-item estimates."""

    kind: str
    window_start: int
    window_end: int
    n: int
    sketch: Any
    estimates: list[tuple[str, int]]
    distinct: dict[str, float]

    def estimate(self, key: str) -> int:
        """The sketch's count of `key`."""
        return int(self.sketch.estimateCount(key))


class SketchState:
    """The driver's open windows (module docstring). `delay_ms`: the watermark delay."""

    def __init__(self, spark: SparkSession, params: SketchParams, delay_ms: int):
        self.spark, self.params = spark, params
        self.window, self.window_ms = params.window, duration_ms(params.window)
        self.delay_ms = delay_ms
        self.cms: dict[tuple[str, int], _Window] = {}
        self.hll = pd.DataFrame(columns=["window_start", "kind", "key", "sketch"])
        self.newest_ms: int | None = None
        jvm = spark.sparkContext._jvm
        assert jvm is not None, "the sketches need a classic (JVM) Spark session"
        self._reader = jvm.org.apache.spark.util.sketch.CountMinSketch

    def add(self, rows: DataFrame) -> None:
        """One batch of input rows (`ROW_COLUMNS`)."""
        cm = self.params.count_min
        rows = windowed(rows.withColumn("t", F.unix_millis("event_ts")), self.window)
        closed_before = self._horizon()
        if closed_before is not None:  # a closed window's rows: dropped as late
            rows = rows.where(F.col("window_start") + self.window_ms > closed_before)
        rows = rows.cache()
        try:
            newest = rows.agg(F.max("t")).first()
            if newest is None or newest[0] is None:
                return
            sketches = count_min_sketches(rows, cm).collect()
            busy = busiest(rows, cm.candidates).collect()
            batch_hll = hll_sketches(rows, self.params.hll).toPandas()
        finally:
            rows.unpersist()
        for r in sketches:
            sketch = self._reader.readFrom(bytes(r["sketch"]))
            at = (r["kind"], r["window_start"])
            if at in self.cms:
                self.cms[at].sketch.mergeInPlace(sketch)
                self.cms[at].n += r["n"]
            else:
                self.cms[at] = _Window(r["n"], sketch)
        for r in busy:
            tracked = self.cms[(r["kind"], r["window_start"])].tracked
            if r["key"] not in tracked:
                tracked.append(r["key"])
        for w in self.cms.values():
            ranked = sorted(w.tracked, key=lambda k: (-int(w.sketch.estimateCount(k)), k))
            w.tracked = ranked[: cm.candidates]
        self._merge_hll(batch_hll)
        self.newest_ms = max(self.newest_ms or newest[0], newest[0])

    def _merge_hll(self, batch: pd.DataFrame) -> None:
        if batch.empty:
            return
        both = pd.concat([self.hll, batch], ignore_index=True) if len(self.hll) else batch
        frame = self.spark.createDataFrame(
            both.assign(sketch=both["sketch"].map(bytes)),
            "window_start long, kind string, key string, sketch binary",
        )
        merged = frame.groupBy("window_start", "kind", "key").agg(
            F.hll_union_agg("sketch").alias("sketch")
        )
        self.hll = merged.toPandas()

    def _horizon(self) -> int | None:
        """Windows ending at or before this are closed."""
        return None if self.newest_ms is None else self.newest_ms - self.delay_ms

    def close(self, everything: bool = False) -> list[Closed]:
        """Remove and return the windows the watermark has passed (`everything`: all)."""
        horizon = self._horizon()
        if horizon is None:
            return []
        done = [at for at in self.cms if everything or at[1] + self.window_ms <= horizon]
        closing = self.hll["window_start"] + self.window_ms <= horizon
        if everything:
            closing = closing | True
        hll_done, self.hll = self.hll[closing], self.hll[~closing].reset_index(drop=True)
        distinct = _hll_estimates(self.spark, hll_done)
        out = []
        for kind, start in sorted(done, key=lambda at: (at[1], at[0])):
            w = self.cms.pop((kind, start))
            ranked = [(k, int(w.sketch.estimateCount(k))) for k in w.tracked]
            out.append(
                Closed(
                    kind,
                    start,
                    start + self.window_ms,
                    w.n,
                    w.sketch,
                    sorted(ranked, key=lambda e: (-e[1], e[0])),
                    distinct.get((kind, start), {}),
                )
            )
        return out


def _hll_estimates(spark: SparkSession, sketches: pd.DataFrame) -> dict[tuple[str, int], dict]:
    """(kind, window_start) -> key -> the HyperLogLog estimate."""
    if sketches.empty:
        return {}
    frame = spark.createDataFrame(
        sketches.assign(sketch=sketches["sketch"].map(bytes)),
        "window_start long, kind string, key string, sketch binary",
    )
    rows = frame.select(
        "window_start", "kind", "key", F.hll_sketch_estimate("sketch").alias("estimate")
    ).collect()
    out: dict[tuple[str, int], dict[str, float]] = {}
    for r in rows:
        out.setdefault((r["kind"], r["window_start"]), {})[r["key"]] = float(r["estimate"])
    return out


def heavy_records(job: str, closed: Iterable[Closed], params: CountMinParams) -> Iterator[dict]:
    """`aggregates.heavy-hitters` records: each closed window's `top` keys by estimate."""
    bound = count_min_bound(params)
    for w in closed:
        for rank, (key, estimate) in enumerate(w.estimates[: params.top], start=1):
            yield {
                "job": job,
                "kind": w.kind,
                "key": key,
                "window_start": w.window_start,
                "window_end": w.window_end,
                "rank": rank,
                "estimate": estimate,
                "window_items": w.n,
                "overcount_bound": round(params.eps * w.n, 3),
                "eps": bound["eps"],
                "delta": bound["delta"],
            }


def distinct_records(
    job: str, closed: Iterable[Closed], params: HllParams, of: Mapping[str, str]
) -> Iterator[dict]:
    """`aggregates.distinct-counts` records: each closed window's keys' distinct items
    (`of`: kind -> what is counted, e.g. terminal -> card)."""
    rse = round(params.rse, 6)
    for w in closed:
        for key, estimate in sorted(w.distinct.items()):
            yield {
                "job": job,
                "kind": w.kind,
                "key": key,
                "of": of.get(w.kind, "item"),
                "window_start": w.window_start,
                "window_end": w.window_end,
                "estimate": round(estimate, 1),
                "rse": rse,
                "lg_config_k": params.lg_config_k,
            }


class SketchSink:
    """`foreachBatch` callable of `<job>.sketches`: each batch of parsed events (with
    `event_ts`) -> `rows(events)` (`ROW_COLUMNS`) -> `SketchState` -> the closed windows'
    records to the two topics. `of`: kind -> what its distinct count counts."""

    def __init__(
        self,
        stack: StackConfig,
        job: str,
        settings: SketchSettings,
        rows: Callable[[DataFrame], DataFrame],
        of: Mapping[str, str],
        delay_ms: int,
    ) -> None:
        self.stack, self.job, self.settings, self.rows, self.of = stack, job, settings, rows, of
        self.delay_ms = delay_ms
        self.state: SketchState | None = None
        self.published = {"heavy_hitters": 0, "distinct_counts": 0}

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self.state is None:
            self.state = SketchState(batch.sparkSession, self.settings, self.delay_ms)
        self.state.add(self.rows(batch))
        closed = self.state.close()
        if not closed:
            return
        s = self.settings
        heavy = list(heavy_records(self.job, closed, s.count_min))
        distinct = list(distinct_records(self.job, closed, s.hll, self.of))
        publish(batch.sparkSession, self.stack, s.heavy_hitters_topic, heavy)
        publish(batch.sparkSession, self.stack, s.distinct_counts_topic, distinct)
        self.published["heavy_hitters"] += len(heavy)
        self.published["distinct_counts"] += len(distinct)


def publish(spark: SparkSession, stack: StackConfig, topic: str, records: list[dict]) -> None:
    """`records` as JSON to `topic`, keyed by their `key`."""
    if not records:
        return
    rows = [(r["key"], json.dumps(r)) for r in records]
    (
        spark.createDataFrame(rows, "key string, value string")
        .write.format("kafka")
        .options(**kafka_options(stack))
        .option("topic", topic)
        .save()
    )


def start_sketches(
    stack: StackConfig,
    events: DataFrame,
    job: str,
    settings: SketchSettings,
    rows: Callable[[DataFrame], DataFrame],
    of: Mapping[str, str],
    delay_ms: int,
    checkpoint: str,
) -> StreamingQuery:
    """Start `<job>.sketches` on the parsed `events` stream (no watermark: the sink keeps its
    own, newest event time less `delay_ms`)."""
    ensure_topics(stack, [settings.heavy_hitters_topic, settings.distinct_counts_topic])
    sink = SketchSink(stack, job, settings, rows, of, delay_ms)
    writer = (
        events.writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
    )
    return start_query(writer, f"{job}.{QUERY_SUFFIX}", settings.trigger)
