"""What a running query reports per batch: rows, rates, watermark, and late rows dropped.

Besides Spark's own figures, a report carries what a batch oracle needs to re-derive which input
the query dropped as late (`pipeline.jobs.vehicles.parity`): the query id, the Kafka
offset range the batch read, and its watermark in epoch ms. A row read by batch `b` is dropped as
late when its event time is at or before the watermark of batch `b - 1` (Spark filters late rows
with the previous batch's watermark, so a chain of stateful operators agrees on what is late).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, ClassVar

from pyspark.sql.streaming import StreamingQueryListener

Offsets = dict[str, dict[str, int]]  # topic -> partition -> offset, as Spark's Kafka source


@dataclass(frozen=True)
class BatchReport:
    query: str
    batch_id: int
    input_rows: int
    input_rows_per_s: float
    processed_rows_per_s: float
    watermark: str | None
    dropped_by_watermark: int
    duration_ms: int
    query_id: str | None = None
    watermark_ms: int | None = None
    watermark_lag_ms: int | None = None
    late_events: int = 0
    start_offsets: Offsets | None = None
    end_offsets: Offsets | None = None
    newest_event_ms: int | None = None  # the newest event time the batch read (simulated time)
    offsets_behind: int | None = None  # records between the batch's end and the topics' end

    @classmethod
    def from_progress(cls, progress: dict[str, Any]) -> BatchReport:
        watermark = progress.get("eventTime", {}).get("watermark")
        watermark_ms = iso_ms(watermark)
        started_ms = iso_ms(progress.get("timestamp"))
        return cls(
            query=progress.get("name") or progress["id"],
            batch_id=progress["batchId"],
            input_rows=progress.get("numInputRows", 0),
            input_rows_per_s=float(progress.get("inputRowsPerSecond") or 0.0),
            processed_rows_per_s=float(progress.get("processedRowsPerSecond") or 0.0),
            watermark=watermark,
            dropped_by_watermark=dropped_by_watermark(progress),
            duration_ms=int(progress.get("durationMs", {}).get("triggerExecution", 0)),
            query_id=progress.get("id"),
            watermark_ms=watermark_ms,
            watermark_lag_ms=(
                None if watermark_ms is None or started_ms is None else started_ms - watermark_ms
            ),
            late_events=late_events(progress),
            start_offsets=source_offsets(progress, "startOffset"),
            end_offsets=source_offsets(progress, "endOffset"),
            newest_event_ms=iso_ms(progress.get("eventTime", {}).get("max")),
            offsets_behind=offsets_behind(progress),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def no_batches() -> dict[str, Any]:
    """A query's totals before its first batch."""
    return {"batches": 0, "input_rows": 0, "dropped_by_watermark": 0, "late_events": 0}


def dropped_by_watermark(progress: dict[str, Any]) -> int:
    """Rows the stateful operators dropped as too late in this batch (summed over operators)."""
    return sum(op.get("numRowsDroppedByWatermark", 0) for op in progress.get("stateOperators", []))


def late_events(progress: dict[str, Any]) -> int:
    """Input rows this batch dropped as too late: the most any one operator dropped.

    Each branch of a union filters the same late input rows, and an operator never sees the
    rows an operator before it dropped, so the sum over operators counts a late row several
    times; the maximum counts it once.

    >>> late_events({"stateOperators": [{"numRowsDroppedByWatermark": 2},
    ...     {"numRowsDroppedByWatermark": 2}, {"numRowsDroppedByWatermark": 0}]})
    2
    """
    return max(
        (op.get("numRowsDroppedByWatermark", 0) for op in progress.get("stateOperators", [])),
        default=0,
    )


def iso_ms(text: str | None) -> int | None:
    """Epoch ms of a Spark progress timestamp such as '2026-01-01T00:00:15.000Z'.

    >>> iso_ms("2026-01-01T00:00:15.000Z"), iso_ms(None)
    (1767225615000, None)
    """
    if not text:
        return None
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def newest_event_ms(progresses: Iterable[Mapping[str, Any]]) -> int | None:
    """The newest event time (epoch ms) any of a query's batch reports read, or None.

    >>> newest_event_ms([{"eventTime": {"max": "2026-01-01T00:00:15.000Z"}}, {"eventTime": {}}])
    1767225615000
    """
    times = [iso_ms(p.get("eventTime", {}).get("max")) for p in progresses]
    return max((t for t in times if t is not None), default=None)


def source_offsets(progress: Mapping[str, Any], which: str) -> Offsets | None:
    """The Kafka offsets a batch started or ended at, merged over its sources (None if none).

    >>> source_offsets({"sources": [{"endOffset": '{"t": {"0": 5, "1": 7}}'}]}, "endOffset")
    {'t': {'0': 5, '1': 7}}
    """
    merged: Offsets = {}
    for source in progress.get("sources", []):
        value = source.get(which)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                continue
        if not isinstance(value, dict):
            continue
        for topic, partitions in value.items():
            if isinstance(partitions, dict):
                merged.setdefault(topic, {}).update({str(p): int(o) for p, o in partitions.items()})
    return merged or None


def offsets_behind(progress: Mapping[str, Any]) -> int | None:
    """Records the query is behind the end of its Kafka topics after this batch: per partition
    both report, the latest offset when the batch was planned minus where the batch ended (at
    least 0), summed; None when the progress lacks either (no Kafka source, or none reported).

    Unlike the watermark against wall clock, this reads the same on a simulated clock.

    >>> offsets_behind({"sources": [{"endOffset": '{"t": {"0": 5, "1": 7}}',
    ...     "latestOffset": '{"t": {"0": 9, "1": 7}}'}]})
    4
    >>> offsets_behind({"sources": [{"endOffset": '{"t": {"0": 5}}'}]}) is None
    True
    """
    latest, end = source_offsets(progress, "latestOffset"), source_offsets(progress, "endOffset")
    if latest is None or end is None:
        return None
    return sum(
        max(0, offset - ended)
        for topic, partitions in latest.items()
        for partition, offset in partitions.items()
        if (ended := end.get(topic, {}).get(partition)) is not None
    )


class _ProgressJson:
    """The JVM's listener callbacks, passing on each progress as its JSON only.

    PySpark's own adapter first rebuilds every progress field by field, dozens of py4j calls
    per batch, each looking classes up by name in the driver's jars: in a `make demo` that was
    22% of the driver JVM's CPU samples (JFR), on the cores the queries need."""

    def __init__(self, on_json: Callable[[str], None]) -> None:
        self.on_json = on_json

    def onQueryStarted(self, jevent: Any) -> None:
        pass

    def onQueryProgress(self, jevent: Any) -> None:
        self.on_json(jevent.progress().json())

    def onQueryIdle(self, jevent: Any) -> None:
        pass

    def onQueryTerminated(self, jevent: Any) -> None:
        pass

    class Java:
        implements: ClassVar[list[str]] = [
            "org.apache.spark.sql.streaming.PythonStreamingQueryListener"
        ]


class ProgressTotals(StreamingQueryListener):
    """Adds up every batch of every query (recentProgress keeps only the last 100).

    Register with `spark.streams.addListener(totals)`; each `on_batch` callback sees each
    BatchReport (e.g. a console printer and a MetricsPublisher). The JVM calls it through
    `_ProgressJson`, not PySpark's field-by-field adapter.
    """

    _java: Any

    @property
    def _jlistener(self) -> Any:
        from pyspark import SparkContext

        if self._java is None:
            jvm = SparkContext._jvm
            assert jvm is not None, "no active SparkContext"
            self._java = jvm.PythonStreamingQueryListenerWrapper(_ProgressJson(self.add_json))
        return self._java

    def __init__(self, *on_batch: Callable[[BatchReport], None]) -> None:
        super().__init__()
        self.on_batch = on_batch
        self.queries: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._java = None

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        self.add_json(event.progress.json)

    def add_json(self, progress: str) -> None:
        """Count one batch's progress (Spark's JSON) and pass its report on."""
        report = BatchReport.from_progress(json.loads(progress))
        with self._lock:
            totals = self.queries.setdefault(report.query, no_batches())
            totals["batches"] += 1
            totals["input_rows"] += report.input_rows
            totals["dropped_by_watermark"] += report.dropped_by_watermark
            totals["late_events"] += report.late_events
            totals["watermark"] = report.watermark
        for callback in self.on_batch:
            callback(report)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Query name -> batches, input_rows, dropped_by_watermark, late_events and the last
        watermark."""
        with self._lock:
            return {name: dict(totals) for name, totals in self.queries.items()}

    def late_events(self) -> int:
        """Input events the job dropped as too late, each counted once: the queries of a job
        read the same input with the same watermark, so the largest per-query count."""
        with self._lock:
            return max((t["late_events"] for t in self.queries.values()), default=0)
