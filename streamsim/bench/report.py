"""The `bench --json` shape of docs/design.md; a figure a benchmark does not measure is left
out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class BenchReport:
    subject: str
    rate_key: str  # "events_per_s" or "requests_per_s"
    rate: float
    reference: str
    reference_rate: float
    latency_ms: dict[str, float] | None = None
    peak_rss_mb: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.rate / self.reference_rate if self.reference_rate else 0.0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "subject": self.subject,
            self.rate_key: round(self.rate, 1),
            "reference": self.reference,
            "reference_rate": round(self.reference_rate, 1),
            "ratio": round(self.ratio, 3),
        }
        if self.latency_ms is not None:
            out["latency_ms"] = self.latency_ms
        if self.peak_rss_mb is not None:
            out["peak_rss_mb"] = round(self.peak_rss_mb, 1)
        return {**out, **self.extra}
