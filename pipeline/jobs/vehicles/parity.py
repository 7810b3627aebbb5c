"""Stream vs batch parity of `vehicles`'s window statistics (the batch oracle).

The streaming stats query (`vehicles.stats`) publishes one row per vehicle and closed
window to `aggregates.vehicle-stats`. The oracle recomputes the same rows with Spark in batch, with
the same code (`pipeline.jobs.vehicles.windows.vehicle_stats`), over exactly the Kafka
offsets the streaming query read (`spark.read.format("kafka")` with explicit starting and ending
offsets), and compares every window the stream has closed:

- **matching**: the stream's row equals the batch row (readings, first and last event time
  exactly; means, minima, maxima and percentiles within a relative `tolerance`);
- **explained_by_late**: it differs, but equals the batch row recomputed without the readings
  the stream dropped as late (or the stream has no row and every reading of the window was
  late). Which readings were late is re-derived from the query's own batch history (the
  `metrics` topic, `pipeline.progress`): a reading read by batch `b` was dropped when its
  event time is at or before the watermark of batch `b - 1`; a duplicate counts once;
- anything else is **unexplained**: a window without late readings must match.

`windows = matching + explained_by_late + unexplained`; `ok` when nothing is unexplained and
the topic holds no key twice with different values (`conflicts`; a replay repeats a row).
Windows the stream has not closed yet (end after its last watermark) are left out (`open`).

    >>> report = vehicle_stats_parity(spark, stack, cfg)       # doctest: +SKIP
    >>> report.summary()                                        # doctest: +SKIP
    {'windows': 68012, 'matching': 67950, 'explained_by_late': 62}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from core.config import StackConfig
from core.contracts.events import PIPELINE_PROGRESS
from core.errors import StreamsimError
from pipeline.config import PipelineConfig
from pipeline.jobs.vehicles.job import ALERTS_QUERY, REQUIRED, STATS_QUERY, VEHICLE_SCHEMA
from pipeline.jobs.vehicles.windows import STATS_KEY, stat_columns, vehicle_stats
from pipeline.kafka_io import parse_events, read_kafka_batch
from pipeline.metrics import METRICS_TOPIC

PROGRESS_SCHEMA = PIPELINE_PROGRESS
EXACT_COLUMNS = ("window_end", "readings", "first_event_time", "last_event_time")
EARLIEST = -2
KEPT = "\u0000on-time"  # tags the on-time copy of a vehicle's readings in the oracle


@dataclass(frozen=True)
class BatchRange:
    """What one batch of the streaming query read, and the watermark it dropped late rows by."""

    batch_id: int
    start: dict[tuple[str, int], int]  # (topic, partition) -> first offset read
    end: dict[tuple[str, int], int]  # (topic, partition) -> offset after the last one read
    late_watermark_ms: int  # the previous batch's watermark (0 before the first batch)
    watermark_ms: int  # this batch's own watermark (what it closes windows by)


@dataclass
class ParityReport:
    windows: int
    matching: int
    explained_by_late: int
    unexplained: int
    open_windows: int
    late_events: int
    windows_with_late_events: int
    query_id: str
    batches: int
    history_gaps: int
    conflicts: int
    tolerance: float
    mismatches: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        explained = self.matching + self.explained_by_late == self.windows
        return explained and self.unexplained == 0 and self.conflicts == 0

    def summary(self) -> dict[str, int]:
        """The `parity` object of the output contract (docs/design.md)."""
        return {
            "windows": self.windows,
            "matching": self.matching,
            "explained_by_late": self.explained_by_late,
        }

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def _offsets(value: Mapping[str, Mapping[str, int]] | None) -> dict[tuple[str, int], int]:
    return {(t, int(p)): int(o) for t, parts in (value or {}).items() for p, o in parts.items()}


def latest_query_history(records: Iterable[Mapping[str, Any]], query: str) -> list[dict[str, Any]]:
    """The progress reports of the latest run of `query` (by query id), one per batch id.

    >>> rows = [{"schema": PROGRESS_SCHEMA, "query": "q", "query_id": "a", "batch_id": 0,
    ...          "at": 1}, {"schema": PROGRESS_SCHEMA, "query": "q", "query_id": "b",
    ...          "batch_id": 0, "at": 5}, {"schema": PROGRESS_SCHEMA, "query": "q",
    ...          "query_id": "b", "batch_id": 1, "at": 6}]
    >>> [(r["query_id"], r["batch_id"]) for r in latest_query_history(rows, "q")]
    [('b', 0), ('b', 1)]
    """
    mine = [
        dict(r)
        for r in records
        if r.get("schema", PROGRESS_SCHEMA) == PROGRESS_SCHEMA
        and r.get("query") == query
        and r.get("query_id")
    ]
    if not mine:
        return []
    latest = max(mine, key=lambda r: (r.get("at") or 0, r["batch_id"]))["query_id"]
    per_batch = {r["batch_id"]: r for r in mine if r["query_id"] == latest}
    return [per_batch[b] for b in sorted(per_batch)]


def initial_offsets(cfg: PipelineConfig) -> dict[tuple[str, int], int]:
    """The job's explicit starting offsets (a JSON `starting_offsets`), else {} (earliest).

    >>> cfg = PipelineConfig(job="vehicles", input_topics=["t"], output_topic="alerts")
    >>> initial_offsets(cfg.model_copy(update={"starting_offsets": '{"t": {"0": 7}}'}))
    {('t', 0): 7}
    """
    text = str(cfg.starting_offsets or "").strip()
    return _offsets(json.loads(text)) if text.startswith("{") else {}


def batch_ranges(
    history: Sequence[Mapping[str, Any]], initial: Mapping[tuple[str, int], int] | None = None
) -> tuple[list[BatchRange], int]:
    """Each data batch's offset range and late-row watermark; and how many batch ids are
    missing from the history (their watermark is then bounded by the last one known).
    A partition first read without a start offset starts at `initial` (the query's explicit
    starting offsets), else at the earliest.

    >>> history = [
    ...     {"batch_id": 0, "watermark_ms": 0, "start_offsets": None,
    ...      "end_offsets": {"t": {"0": 5}}},
    ...     {"batch_id": 1, "watermark_ms": 900, "start_offsets": {"t": {"0": 5}},
    ...      "end_offsets": {"t": {"0": 5}}},
    ...     {"batch_id": 2, "watermark_ms": 900, "start_offsets": {"t": {"0": 5}},
    ...      "end_offsets": {"t": {"0": 9}}}]
    >>> ranges, gaps = batch_ranges(history)
    >>> [(r.batch_id, r.start, r.end, r.late_watermark_ms) for r in ranges], gaps
    ([(0, {('t', 0): -2}, {('t', 0): 5}, 0), (2, {('t', 0): 5}, {('t', 0): 9}, 900)], 0)
    """
    ranges: list[BatchRange] = []
    gaps = 0
    previous_id: int | None = None
    previous_watermark = 0
    previous_end: dict[tuple[str, int], int] = {}
    for report in sorted(history, key=lambda r: int(r["batch_id"])):
        batch_id = int(report["batch_id"])
        if previous_id is not None and batch_id != previous_id + 1:
            gaps += batch_id - previous_id - 1
        elif previous_id is None and batch_id != 0:
            gaps += 1  # the batch before the first one known (a restart) is missing
        end = _offsets(report.get("end_offsets"))
        start = _offsets(report.get("start_offsets"))
        first = initial or {}
        start = {k: start.get(k, previous_end.get(k, first.get(k, EARLIEST))) for k in end}
        watermark = int(report.get("watermark_ms") or 0)
        if any(end[k] > start[k] or start[k] == EARLIEST for k in end):
            ranges.append(BatchRange(batch_id, start, end, previous_watermark, watermark))
        previous_id, previous_end = batch_id, {**previous_end, **end}
        previous_watermark = max(previous_watermark, watermark)
    return ranges, gaps


def offsets_json(offsets: Mapping[tuple[str, int], int]) -> str:
    """Spark's JSON form of per-partition offsets.

    >>> offsets_json({("t", 1): 7, ("t", 0): -2})
    '{"t": {"0": -2, "1": 7}}'
    """
    nested: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        nested.setdefault(topic, {})[str(partition)] = offset
    return json.dumps(nested)


def read_history(
    stack: StackConfig, query: str = STATS_QUERY, query_id: str | None = None
) -> list[dict[str, Any]]:
    """The run of `query` with this `query_id` (default: the latest run) from the metrics
    topic. Other jobs on the stack publish there too, so a caller that knows its query's id
    passes it."""
    from core.kafka.reader import read_topic

    records = read_topic(stack, METRICS_TOPIC)
    if query_id is not None:
        records = [r for r in records if r.get("query_id") == query_id]
    return latest_query_history(records, query)


def _ranges_frame(spark: SparkSession, ranges: Sequence[BatchRange]) -> DataFrame:
    rows = [
        (topic, partition, r.start[(topic, partition)], end, r.late_watermark_ms, r.batch_id)
        for r in ranges
        for (topic, partition), end in r.end.items()
    ]
    schema = StructType(
        [
            StructField("r_topic", StringType()),
            StructField("r_partition", LongType()),
            StructField("r_start", LongType()),
            StructField("r_end", LongType()),
            StructField("late_watermark_ms", LongType()),
            StructField("batch_id", LongType()),
        ]
    )
    return spark.createDataFrame(rows, schema)


def classify_late(events: DataFrame, ranges: DataFrame) -> DataFrame:
    """Each reading with `counted`: whether the stream kept it (its event id's first copy was
    on time). A reading outside every batch range is left out."""
    start = F.when(F.col("r_start") < 0, F.lit(-1)).otherwise(F.col("r_start"))
    located = events.join(
        F.broadcast(ranges),
        (F.col("topic") == F.col("r_topic"))
        & (F.col("partition") == F.col("r_partition"))
        & (F.col("offset") >= start)
        & (F.col("offset") < F.col("r_end")),
    )
    on_time = F.col("event_time") > F.col("late_watermark_ms")
    by_id = Window.partitionBy("event_id")
    return located.withColumn("counted", F.max(on_time).over(by_id)).drop(
        "r_topic", "r_partition", "r_start", "r_end"
    )


def _close(a: Column, b: Column, tolerance: float) -> Column:
    both_null = a.isNull() & b.isNull()
    scale = F.greatest(F.lit(1.0), F.abs(a), F.abs(b))
    return F.coalesce(both_null | (F.abs(a - b) <= F.lit(tolerance) * scale), F.lit(False))


def rows_equal(left: str, right: str, stats: Sequence[str], tolerance: float) -> Column:
    """Whether the `left.*` and `right.*` rows are both present and equal (see the module
    docstring); False when either is missing."""
    present = F.col(f"{left}.readings").isNotNull() & F.col(f"{right}.readings").isNotNull()
    same = present
    for name in EXACT_COLUMNS:
        same = same & F.coalesce(F.col(f"{left}.{name}") == F.col(f"{right}.{name}"), F.lit(False))
    for name in stats:
        same = same & _close(F.col(f"{left}.{name}"), F.col(f"{right}.{name}"), tolerance)
    return same


def stream_stats(
    spark: SparkSession, stack: StackConfig, topic: str, query_id: str, schema: StructType
) -> tuple[DataFrame, int]:
    """The streaming query's rows from its topic (one per key), and how many keys it wrote
    twice with different values (a replay must repeat a row exactly)."""
    parsed = (
        read_kafka_batch(spark, stack, [topic])
        .select(
            F.from_json(
                "value", StructType([*schema.fields, StructField("query_id", StringType())])
            ).alias("r")
        )
        .select("r.*")
        .where(F.col("query_id") == query_id)
        .drop("query_id")
    )
    distinct = parsed.dropDuplicates()
    conflicts = distinct.groupBy(*STATS_KEY).count().where(F.col("count") > 1).count()
    return distinct.dropDuplicates(list(STATS_KEY)), conflicts


def vehicle_stats_parity(
    spark: SparkSession,
    stack: StackConfig,
    cfg: PipelineConfig,
    history: Sequence[Mapping[str, Any]] | None = None,
    tolerance: float = 1e-9,
    max_mismatches: int = 20,
) -> ParityReport:
    """Compare the stats topic with the batch oracle; see the module docstring.

    `history`: the stats query's progress reports (`BatchReport.to_dict()`, one per batch of
    one query id); default: the latest run in the metrics topic.
    """
    history = list(history) if history is not None else read_history(stack)
    if not history:
        raise StreamsimError(
            f"no progress of {STATS_QUERY} in the {METRICS_TOPIC} topic: run the job with "
            "`streamsim pipeline run vehicles` first (it publishes every batch)"
        )
    query_id = str(history[-1]["query_id"])
    ranges, gaps = batch_ranges(history, initial_offsets(cfg))
    final_watermark = max(int(r.get("watermark_ms") or 0) for r in history)
    if not ranges:
        raise StreamsimError(f"{STATS_QUERY} ({query_id}) has read no input yet")
    classified = _classified(spark, stack, cfg, ranges).persist()
    try:
        return _compare(
            spark,
            stack,
            cfg,
            classified,
            query_id,
            final_watermark,
            len(history),
            gaps,
            tolerance,
            max_mismatches,
        )
    finally:
        classified.unpersist()


def _classified(
    spark: SparkSession, stack: StackConfig, cfg: PipelineConfig, ranges: Sequence[BatchRange]
) -> DataFrame:
    """The readings the batches read (exactly their offsets), each with `counted`."""
    starting: dict[tuple[str, int], int] = {}
    ending: dict[tuple[str, int], int] = {}
    for r in ranges:
        for k, v in r.start.items():
            starting.setdefault(k, v)
        ending.update(r.end)
    raw = read_kafka_batch(
        spark, stack, cfg.input_topics, offsets_json(starting), offsets_json(ending)
    )
    events, _ = parse_events(raw, VEHICLE_SCHEMA, REQUIRED, keep=("topic", "partition", "offset"))
    return classify_late(events, _ranges_frame(spark, ranges))


def late_event_ids(
    spark: SparkSession,
    stack: StackConfig,
    cfg: PipelineConfig,
    query: str = ALERTS_QUERY,
    history: Sequence[Mapping[str, Any]] | None = None,
) -> list[str]:
    """The event ids `query` dropped as late (every copy it read was at or before its batch's
    late watermark), re-derived from its batch history like the parity check's; [] when the
    query has no history."""
    history = list(history) if history is not None else read_history(stack, query)
    ranges, _ = batch_ranges(history, initial_offsets(cfg))
    if not ranges:
        return []
    late = _classified(spark, stack, cfg, ranges).where(~F.col("counted"))
    return [row["event_id"] for row in late.select("event_id").distinct().collect()]


def _compare(
    spark: SparkSession,
    stack: StackConfig,
    cfg: PipelineConfig,
    classified: DataFrame,
    query_id: str,
    final_watermark: int,
    batches: int,
    gaps: int,
    tolerance: float,
    max_mismatches: int,
) -> ParityReport:
    s = cfg.vehicles
    columns = stat_columns(s.stats_signals, s.percentiles)

    # One aggregation for both oracles: the on-time copies under a tagged vehicle id.
    every = classified.dropDuplicates(["event_id"]).persist()
    kept = every.where("counted").withColumn("vehicle_id", F.concat("vehicle_id", F.lit(KEPT)))
    both = vehicle_stats(
        every.unionByName(kept),
        s.stats_windows,
        s.stats_signals,
        s.percentiles,
        s.percentile_sketch_k,
    ).drop("schema")
    closed = F.col("window_end") <= F.lit(final_watermark)
    tagged = F.col("vehicle_id").endswith(KEPT)
    oracles = both.withColumn("open", ~closed).persist()
    stream: DataFrame | None = None
    verdicts: DataFrame | None = None
    try:
        late_events = every.where(~F.col("counted")).count()
        open_windows = oracles.where(F.col("open") & ~tagged).count()
        oracle = oracles.where(~tagged & closed).drop("open")
        on_time = (
            oracles.where(tagged & closed)
            .drop("open")
            .withColumn("vehicle_id", F.expr(f"left(vehicle_id, length(vehicle_id) - {len(KEPT)})"))
        )
        stream, conflicts = stream_stats(spark, stack, s.stats_topic, query_id, oracle.schema)
        stream = stream.persist()
        key = list(STATS_KEY)
        joined = (
            oracle.alias("a")
            .join(on_time.alias("k"), key, "full_outer")
            .join(stream.alias("s"), key, "full_outer")
        )
        matching = rows_equal("s", "a", columns, tolerance)
        with_late = F.coalesce(F.col("a.readings"), F.lit(0)) != F.coalesce(
            F.col("k.readings"), F.lit(0)
        )
        explained = (
            ~matching
            & with_late
            & (
                rows_equal("s", "k", columns, tolerance)
                | (F.col("s.readings").isNull() & F.col("k.readings").isNull())
            )
        )
        verdicts = joined.select(
            *key,
            F.when(matching, "matching")
            .when(explained, "explained_by_late")
            .otherwise("unexplained")
            .alias("verdict"),
            with_late.alias("with_late"),
            F.col("a.readings").alias("batch_readings"),
            F.col("k.readings").alias("on_time_readings"),
            F.col("s.readings").alias("stream_readings"),
        ).persist()
        tally = verdicts.groupBy("verdict", "with_late").count().collect()
        counts: dict[str, int] = {}
        for row in tally:
            counts[row["verdict"]] = counts.get(row["verdict"], 0) + row["count"]
        windows_with_late = sum(row["count"] for row in tally if row["with_late"])
        mismatches = [
            r.asDict()
            for r in verdicts.where(F.col("verdict") == "unexplained")
            .orderBy(*key)
            .limit(max_mismatches)
            .collect()
        ]
    finally:
        for frame in (verdicts, stream, oracles, every):
            if frame is not None:
                frame.unpersist()
    return ParityReport(
        windows=sum(counts.values()),
        matching=counts.get("matching", 0),
        explained_by_late=counts.get("explained_by_late", 0),
        unexplained=counts.get("unexplained", 0),
        open_windows=open_windows,
        late_events=late_events,
        windows_with_late_events=windows_with_late,
        query_id=query_id,
        batches=batches,
        history_gaps=gaps,
        conflicts=conflicts,
        tolerance=tolerance,
        mismatches=mismatches,
    )
