"""A load test end to end: send times, bodies, the run, the report and charts.

Everything the generator sends is built before the clock starts: the intended send times
(`shapes.send_times`), the bodies (`payloads.build_payloads`) and each full HTTP request as
bytes. Then `runner.OpenLoopRunner` sends them on uvloop, and the report and charts are written
to the output folder.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import uvloop

from core.config import StackConfig
from streamsim.loadtest.charts import write_charts
from streamsim.loadtest.config import (
    HttpPath,
    HttpTarget,
    KafkaPath,
    KafkaTarget,
    LoadTestConfig,
    ScenarioTarget,
)
from streamsim.loadtest.connection import post_request, request_head
from streamsim.loadtest.payloads import build_payloads, id_tag
from streamsim.loadtest.recorder import Recorder
from streamsim.loadtest.report import build_report, dumps
from streamsim.loadtest.runner import OpenLoopRunner, RunResult
from streamsim.loadtest.shapes import send_times

#: (sent, finished, total, the run's recorder): about 4 times a second while it sends.
Progress = Callable[[int, int, int, Recorder], None]


@dataclass(frozen=True)
class Plan:
    times_s: np.ndarray
    requests: list[bytes]
    expect_422: np.ndarray
    payload_kinds: dict[str, int]


def plan(
    config: LoadTestConfig,
    base_url: str,
    run_tag: str | None = None,
    path: HttpPath | None = None,
) -> Plan:
    """Send times and every request's bytes; deterministic in the config apart from the
    run tag (transaction ids) and the event times (wall clock at planning + intended time)."""
    the_path = path or http_path(config)
    rng = np.random.default_rng([config.seed, 0xA221])
    times = send_times(the_path.load, config.total_s, config.arrivals, rng)
    payloads = build_payloads(the_path.payload, times, config.seed)
    tag = run_tag or id_tag()
    base_ms = time.time_ns() // 1_000_000
    head = request_head(base_url, the_path.target.path, the_path.target.headers)
    requests = [post_request(head, body) for body in payloads.bodies(times, tag, base_ms)]
    return Plan(times, requests, payloads.expect_422, payloads.counts())


def http_path(config: LoadTestConfig) -> HttpPath:
    """The file's HTTP target with the file's load, payload, client and SLOs."""
    target = config.target
    if isinstance(target, ScenarioTarget):
        return target.http
    if not isinstance(target, HttpTarget):
        raise TypeError("not an http target")
    return HttpPath(
        target=target,
        load=config.load,
        payload=config.payload,
        client=config.client,
        slo=config.slo,
    )


def kafka_path(config: LoadTestConfig) -> KafkaPath:
    target = config.target
    if isinstance(target, ScenarioTarget):
        return target.kafka
    if not isinstance(target, KafkaTarget):
        raise TypeError("not a kafka target")
    return KafkaPath(target=target, load=config.load, slo=config.slo)


def execute(
    config: LoadTestConfig,
    base_url: str,
    the_plan: Plan,
    progress: Progress | None = None,
    path: HttpPath | None = None,
) -> RunResult:
    the_path = path or http_path(config)
    recorder = Recorder(the_plan.times_s, the_plan.expect_422, config.warmup_s)
    runner = OpenLoopRunner(
        base_url,
        the_plan.requests,
        the_plan.times_s,
        recorder,
        connections=the_path.client.connections,
        max_in_flight=the_path.client.max_in_flight,
        timeout_s=the_path.target.timeout_s,
    )

    async def main() -> RunResult:
        if progress is None:
            return await runner.run()
        task = asyncio.create_task(runner.run())
        while not task.done():
            await asyncio.wait({task}, timeout=0.25)
            progress(runner.dispatched, recorder.finished, len(the_plan.times_s), recorder)
        return task.result()

    return uvloop.run(main())


def run_http(
    config: LoadTestConfig,
    stack: StackConfig,
    name: str,
    out: Path,
    progress: Progress | None = None,
    path: HttpPath | None = None,
) -> dict[str, Any]:
    """The HTTP path: run, write its report, latency histogram and charts into `out`."""
    the_path = path or http_path(config)
    base_url = the_path.target.base_url(stack)
    the_plan = plan(config, base_url, path=the_path)
    result = execute(config, base_url, the_plan, progress, path=the_path)
    report = build_report(
        config,
        result,
        name=name,
        target=base_url + the_path.target.path,
        payload_kinds=the_plan.payload_kinds,
        slo=the_path.slo,
        load=the_path.load,
    )
    return _write(report, result, config, out)


def run_kafka_path(
    config: LoadTestConfig,
    stack: StackConfig,
    name: str,
    out: Path,
    progress: Progress | None = None,
    path: KafkaPath | None = None,
) -> dict[str, Any]:
    """The Kafka path: records at the load shape, ack latency, lag and end-to-end latency."""
    from streamsim.loadtest.kafka_target import (
        percentiles_ms,
        plan_records,
        run_kafka,
        write_lag_chart,
    )

    the_path = path or kafka_path(config)
    rng = np.random.default_rng([config.seed, 0xA221])
    times = send_times(the_path.load, config.total_s, config.arrivals, rng)
    records = plan_records(the_path.target, stack, len(times), config.seed)
    run = run_kafka(the_path.target, stack, records, times, config.warmup_s, progress)
    extra: dict[str, Any] = {}
    if run.lag is not None:
        extra["lag"] = {"max": run.lag["max"], "recovery_s": run.lag["recovery_s"]}
    if run.end_to_end:
        extra["end_to_end_ms"] = percentiles_ms(run.end_to_end)
    report = build_report(
        config,
        run.result,
        name=name,
        target=f"kafka:{records.topic}",
        payload_kinds=records.kinds,
        slo=the_path.slo,
        extra=extra,
        load=the_path.load,
    )
    report["job"] = the_path.target.job
    if run.lag is not None:
        report["lag_recovered_at"] = run.lag["recovered_at"]
        report["lag_samples"] = len(run.lag_samples)
    report["alerts_traced"] = run.alerts_traced
    report = _write(report, run.result, config, out)
    if run.lag_samples:
        charts = write_lag_chart(run.lag_samples, config.warmup_s, out)
        report["charts"] += [str(p) for p in charts if p.suffix == ".html"]
        (out / "report.json").write_bytes(dumps(report))
    return report


def _write(
    report: dict[str, Any], result: RunResult, config: LoadTestConfig, out: Path
) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    charts = write_charts(result.recorder, config.total_s, config.warmup_s, out)
    report["out"] = str(out)
    report["charts"] = [str(p) for p in charts if p.suffix == ".html"]
    (out / "report.json").write_bytes(dumps(report))
    (out / "latency.hdr").write_bytes(result.recorder.histogram.encode())
    return report


def run_scenario_target(
    config: LoadTestConfig,
    stack: StackConfig,
    name: str,
    out: Path,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Both paths at once (Kafka on a thread, HTTP on the event loop): the HTTP report's
    contract keys at the top, each path's full report under `paths`, `ok` when both are."""
    target = config.target
    assert isinstance(target, ScenarioTarget)
    kafka_report: dict[str, Any] = {}
    failure: list[BaseException] = []

    def kafka_side() -> None:
        try:
            kafka_report.update(
                run_kafka_path(config, stack, f"{name}.kafka", out / "kafka", path=target.kafka)
            )
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=kafka_side, name="kafka-path")
    thread.start()
    try:
        http_report = run_http(config, stack, f"{name}.http", out / "http", progress, target.http)
    finally:
        thread.join()
    if failure:
        raise failure[0]
    report = {
        **{k: http_report[k] for k in CONTRACT_KEYS},
        "ok": bool(http_report["ok"] and kafka_report["ok"]),
        "name": name,
        "paths": {"http": http_report, "kafka": kafka_report},
        "out": str(out),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_bytes(dumps(report))
    return report


CONTRACT_KEYS = ("requests", "errors", "achieved_rate", "latency_ms", "slo")


def run_loadtest(
    config: LoadTestConfig,
    stack: StackConfig,
    name: str,
    out: Path,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run, write `report.json` and the charts into `out`; the report (with `out` added)."""
    if isinstance(config.target, KafkaTarget):
        return run_kafka_path(config, stack, name, out, progress)
    if isinstance(config.target, ScenarioTarget):
        return run_scenario_target(config, stack, name, out, progress)
    return run_http(config, stack, name, out, progress)
