"""`verify-stream`: measure a produced stream's disorder against its truth, and optionally
check the figures against the scenario's configured parameters."""

from __future__ import annotations

from typing import Any

from scenarios.catalog import ScenarioConfig
from streamsim.verify.checks import run_checks
from streamsim.verify.measure import join, measure
from streamsim.verify.readers import Stream, Truth, read_jsonl, read_kafka


def verify(stream: Stream, truth: Truth, config: ScenarioConfig | None = None) -> dict[str, Any]:
    joined = join(stream, truth)
    report = measure(joined)
    if config is not None:
        checks = run_checks(joined, report, config)
        report["checks"] = checks
        report["ok"] = all(c["ok"] for c in checks.values())
    return report


__all__ = ["read_jsonl", "read_kafka", "verify"]
