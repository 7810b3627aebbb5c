"""The load-test report: the `loadtest --json` contract keys first, then the detail.

Contract (docs/design.md): `requests`, `errors`, `achieved_rate`, `latency_ms` {p50, p90, p99,
p999, max}, `slo` {name: {threshold, measured, ok}}, `ok`. Definitions:
- `requests`: requests intended in the measured window (after the warm-up);
- `errors`: those that failed (see `recorder`); expected 422s are not errors;
- `achieved_rate`: good answers completed in the measured window per second of it;
- `latency_ms`: completion - intended send time, answered measured requests, HdrHistogram.

Detail beyond the contract includes two diagnostics for telling a slow server from a late
generator: `generator_lag_ms` (how late the generator got to each intended send time) and
`latency_from_send_ms` (completion - actual send: what a tool with coordinated omission would
report).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import orjson

from streamsim.loadtest.config import LoadTestConfig, SloSettings
from streamsim.loadtest.recorder import ERROR, SHED
from streamsim.loadtest.runner import RunResult
from streamsim.loadtest.slo import all_ok, evaluate


def _ms_percentiles(seconds: np.ndarray) -> dict[str, float | None]:
    values = seconds[~np.isnan(seconds)]
    if values.size == 0:
        return {"p50": None, "p99": None, "max": None}
    p50, p99 = np.percentile(values, [50, 99])
    return {
        "p50": round(float(p50) * 1000, 3),
        "p99": round(float(p99) * 1000, 3),
        "max": round(float(values.max()) * 1000, 3),
    }


def build_report(
    config: LoadTestConfig,
    result: RunResult,
    *,
    name: str,
    target: str,
    payload_kinds: dict[str, int],
    slo: SloSettings | None = None,
    warmup_s: float | None = None,
    duration_s: float | None = None,
    extra: dict[str, Any] | None = None,
    load: Any = None,
) -> dict[str, Any]:
    """`slo`, `warmup_s`, `duration_s`: a path's own (a `scenario` target), else the file's.
    `extra`: Kafka figures, `lag` {max, recovery_s} and `end_to_end_ms` {p50, p99}, placed
    after `latency_ms` and checked by the lag and e2e SLOs (left out when not measured)."""
    rec = result.recorder
    load = config.load if load is None else load
    requests = rec.requests
    errors = sum(rec.errors.values())
    warmup = config.warmup_s if warmup_s is None else warmup_s
    duration = config.duration_s if duration_s is None else duration_s
    extra = {k: v for k, v in (extra or {}).items() if v is not None}
    lag = extra.get("lag") or {}
    e2e = extra.get("end_to_end_ms") or {}
    achieved_rate = rec.good_in_window(warmup, warmup + duration) / duration
    intended_rate = requests / duration
    latency = rec.latency_ms()
    figures = {
        "latency_ms": latency,
        "error_rate": round(errors / requests, 6) if requests else None,
        "achieved_rate_fraction": round(achieved_rate / intended_rate, 4)
        if intended_rate
        else None,
        "in_flight_limit_hits": result.in_flight_limit_hits,
        "lag_max": lag.get("max"),
        "lag_recovery_s": lag.get("recovery_s"),
        "e2e_p50_ms": e2e.get("p50"),
        "e2e_p99_ms": e2e.get("p99"),
    }
    slo_used = config.slo if slo is None else slo
    checks = evaluate(slo_used, figures)
    measured_lag = result.generator_lag_s[rec.first_measured :]
    return {
        "requests": requests,
        "errors": errors,
        "achieved_rate": round(achieved_rate, 1),
        "latency_ms": latency,
        **{k: extra[k] for k in ("lag", "end_to_end_ms") if k in extra},
        "slo": checks,
        "ok": all_ok(checks) and requests > 0,
        "name": name,
        "target": target,
        "started_at": dt.datetime.fromtimestamp(result.started_at, dt.UTC).isoformat(),
        "duration_s": duration,
        "warmup_s": warmup,
        "intended_rate": round(intended_rate, 1),
        "achieved_rate_fraction": figures["achieved_rate_fraction"],
        "error_rate": figures["error_rate"],
        "errors_by_kind": dict(sorted(rec.errors.items())),
        "shed": rec.shed,
        "shed_rate": round(rec.shed / requests, 6) if requests else None,
        "shed_latency_ms": rec.shed_latency_ms(),
        "statuses": {str(k): v for k, v in sorted(rec.statuses.items())},
        "decisions": dict(sorted(rec.decisions.items())),
        "payload_kinds": payload_kinds,
        "in_flight_limit_hits": result.in_flight_limit_hits,
        "max_in_flight": result.max_in_flight,
        "waited_for_connection": result.waited_for_connection,
        "connect_failures": result.connect_failures,
        "generator_lag_ms": _ms_percentiles(measured_lag),
        "latency_from_send_ms": rec.latency_from_send_ms(),
        "warmup": {
            "requests": rec.first_measured,
            "errors": sum(rec.warmup_errors.values()),
        },
        "elapsed_s": round(result.elapsed_s, 3),
        **(
            {"step_knee": knee}
            if (knee := step_table(load, rec, warmup, config.total_s, slo_used.p99_ms))
            else {}
        ),
    }


def step_table(
    load: Any, rec: Any, warmup_s: float, total_s: float, p99_ms: float | None
) -> dict[str, Any] | None:
    """For a step load: per step, its rate, requests, errors and p99 (ms, from the intended
    send time, measured requests only), and `knee_rate`: the highest step rate whose p99 is
    within `p99_ms` with no errors (None when none holds). Not a step load: None."""
    if getattr(load, "type", None) != "step":
        return None
    times = np.asarray(rec.times)
    steps = []
    ends = [s.at_s for s in load.steps[1:]] + [total_s]
    for step, end in zip(load.steps, ends, strict=True):
        lo, hi = max(step.at_s, warmup_s), min(end, total_s)
        if hi <= lo:
            continue
        inside = (times >= lo) & (times < hi)
        shed = inside & (rec.outcome == SHED)
        lat = rec.latency_s[inside & ~shed]  # the accepted requests' latency
        answered = lat[~np.isnan(lat)]
        errors = int(np.count_nonzero(rec.outcome[inside] == ERROR))
        p99 = round(float(np.percentile(answered, 99)) * 1000, 3) if answered.size else None
        holds = p99 is not None and errors == 0 and (p99_ms is None or p99 <= p99_ms)
        steps.append(
            {
                "rate": step.rate,
                "requests": int(np.count_nonzero(inside)),
                "errors": errors,
                "shed": int(np.count_nonzero(shed)),
                "p99_ms": p99,
                "holds": holds,
            }
        )
    held = [s["rate"] for s in steps if s["holds"]]
    return {"steps": steps, "knee_rate": max(held) if held else None}


def dumps(report: dict[str, Any]) -> bytes:
    return orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)


def summary(report: dict[str, Any]) -> str:
    """The human summary."""
    lat = report["latency_ms"]

    def ms(key: str) -> str:
        return "-" if lat[key] is None else f"{lat[key]:.2f}"

    lines = [
        f"{report['name']} -> {report['target']}: {report['requests']:,} requests in "
        f"{report['duration_s']:g} s (+{report['warmup_s']:g} s warm-up), intended "
        f"{report['intended_rate']:,.0f}/s, achieved {report['achieved_rate']:,.0f}/s",
        f"latency ms from intended send time: p50 {ms('p50')}  p90 {ms('p90')}  "
        f"p99 {ms('p99')}  p99.9 {ms('p999')}  max {ms('max')}",
        f"errors {report['errors']:,} {report['errors_by_kind'] or ''}; statuses "
        f"{report['statuses']}; decisions {report['decisions']}",
        f"shed (429, apart from errors; latency above is the accepted requests'): "
        f"{report.get('shed', 0):,}"
        + (
            f", answered in p50 {report['shed_latency_ms']['p50']} ms, p99 "
            f"{report['shed_latency_ms']['p99']} ms"
            if report.get("shed")
            else ""
        ),
        f"from the actual send (what coordinated omission would show): p50 "
        f"{report['latency_from_send_ms']['p50']}  p99 {report['latency_from_send_ms']['p99']}; "
        f"generator lag ms p50 {report['generator_lag_ms']['p50']} p99 "
        f"{report['generator_lag_ms']['p99']}",
        f"waited for a connection "
        f"{report['waited_for_connection']:,}; in-flight peak {report['max_in_flight']:,}, "
        f"limit hits {report['in_flight_limit_hits']:,}",
    ]
    if "lag" in report:
        lines.append(
            f"job lag (records): max {report['lag']['max']:,}, recovered in "
            f"{report['lag']['recovery_s']} s"
        )
    if "end_to_end_ms" in report:
        e2e = report["end_to_end_ms"]
        lines.append(f"produce -> alert ms: p50 {e2e['p50']}  p99 {e2e['p99']}")
    if "step_knee" in report:
        for step in report["step_knee"]["steps"]:
            mark = "holds" if step["holds"] else "fails"
            lines.append(
                f"  step {step['rate']:,.0f}/s: p99 {step['p99_ms']} ms, "
                f"errors {step['errors']:,}, shed {step.get('shed', 0):,} ({mark})"
            )
        lines.append(f"knee: highest rate where p99 holds {report['step_knee']['knee_rate']}")
    for name, check in report["slo"].items():
        mark = "[green]ok[/]" if check["ok"] else "[bold red]FAIL[/]"
        lines.append(f"  SLO {name}: {check['measured']} vs {check['threshold']} {mark}")
    lines.append("[green]all SLOs met[/]" if report["ok"] else "[bold red]SLO failed[/]")
    return "\n".join(lines)
