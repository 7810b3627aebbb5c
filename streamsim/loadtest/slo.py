"""SLO checks: each set threshold against its measured figure.

Latencies, the error rate and the in-flight-limit hits pass at or below their threshold; the
achieved-rate fraction passes at or above it. A figure that could not be measured (no answer
at all) fails its check.
"""

from __future__ import annotations

from typing import Any

from streamsim.loadtest.config import SloSettings

LATENCY_KEYS = {
    "p50_ms": "p50",
    "p90_ms": "p90",
    "p99_ms": "p99",
    "p999_ms": "p999",
    "max_ms": "max",
}
AT_LEAST = frozenset({"achieved_rate_fraction"})


def evaluate(slo: SloSettings, figures: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """`figures`: `latency_ms` (p50..max), `error_rate`, `achieved_rate_fraction`,
    `in_flight_limit_hits`. Returns {name: {threshold, measured, ok}} for every set threshold."""
    checks: dict[str, dict[str, Any]] = {}
    for name, threshold in slo.model_dump().items():
        if threshold is None:
            continue
        if name in LATENCY_KEYS:
            measured = figures["latency_ms"].get(LATENCY_KEYS[name])
        else:
            measured = figures.get(name)
        if measured is None:
            ok = False
        elif name in AT_LEAST:
            ok = measured >= threshold
        else:
            ok = measured <= threshold
        checks[name] = {"threshold": threshold, "measured": measured, "ok": bool(ok)}
    return checks


def all_ok(checks: dict[str, dict[str, Any]]) -> bool:
    return all(check["ok"] for check in checks.values())
