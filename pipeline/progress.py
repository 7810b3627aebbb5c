"""What a running query reports per batch: rows, rates, watermark, and late rows dropped."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener


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

    @classmethod
    def from_progress(cls, progress: dict[str, Any]) -> BatchReport:
        return cls(
            query=progress.get("name") or progress["id"],
            batch_id=progress["batchId"],
            input_rows=progress.get("numInputRows", 0),
            input_rows_per_s=float(progress.get("inputRowsPerSecond") or 0.0),
            processed_rows_per_s=float(progress.get("processedRowsPerSecond") or 0.0),
            watermark=progress.get("eventTime", {}).get("watermark"),
            dropped_by_watermark=dropped_by_watermark(progress),
            duration_ms=int(progress.get("durationMs", {}).get("triggerExecution", 0)),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def dropped_by_watermark(progress: dict[str, Any]) -> int:
    """Rows the stateful operators dropped as too late in this batch."""
    return sum(op.get("numRowsDroppedByWatermark", 0) for op in progress.get("stateOperators", []))


class ProgressTotals(StreamingQueryListener):
    """Adds up every batch of every query (recentProgress keeps only the last 100).

    Register with `spark.streams.addListener(totals)`; each `on_batch` callback sees each
    BatchReport (e.g. a console printer and a MetricsPublisher).
    """

    def __init__(self, *on_batch: Callable[[BatchReport], None]) -> None:
        super().__init__()
        self.on_batch = on_batch
        self.queries: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        report = BatchReport.from_progress(json.loads(event.progress.json))
        with self._lock:
            totals = self.queries.setdefault(
                report.query, {"batches": 0, "input_rows": 0, "dropped_by_watermark": 0}
            )
            totals["batches"] += 1
            totals["input_rows"] += report.input_rows
            totals["dropped_by_watermark"] += report.dropped_by_watermark
            totals["watermark"] = report.watermark
        for callback in self.on_batch:
            callback(report)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Query name -> batches, input_rows, dropped_by_watermark and the last watermark."""
        with self._lock:
            return {name: dict(totals) for name, totals in self.queries.items()}

    def dropped_by_watermark(self) -> int:
        with self._lock:
            return sum(t["dropped_by_watermark"] for t in self.queries.values())
