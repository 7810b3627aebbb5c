"""What a running query reports per batch: rows, rates, watermark, and late rows dropped."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


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
