"""A load test end to end: send times, bodies, the run, the report and charts.

Everything the generator sends is built before the clock starts: the intended send times
(`shapes.send_times`), the bodies (`payloads.build_payloads`) and each full HTTP request as
bytes. Then `runner.OpenLoopRunner` sends them on uvloop, and the report and charts are written
to the output folder.
"""

from __future__ import annotations

import asyncio
import secrets
import string
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import uvloop

from core.config import StackConfig
from streamsim.loadtest.charts import write_charts
from streamsim.loadtest.config import LoadTestConfig
from streamsim.loadtest.connection import post_request, request_head
from streamsim.loadtest.payloads import build_payloads
from streamsim.loadtest.recorder import Recorder
from streamsim.loadtest.report import build_report, dumps
from streamsim.loadtest.runner import OpenLoopRunner, RunResult
from streamsim.loadtest.shapes import send_times

Progress = Callable[[int, int, int], None]  # (sent, finished, total)


@dataclass(frozen=True)
class Plan:
    times_s: np.ndarray
    requests: list[bytes]
    expect_422: np.ndarray
    payload_kinds: dict[str, int]


def plan(config: LoadTestConfig, base_url: str, run_tag: str | None = None) -> Plan:
    """Send times and every request's bytes; deterministic in the config apart from the
    run tag (transaction ids) and the event times (wall clock at planning + intended time)."""
    rng = np.random.default_rng([config.seed, 0xA221])
    times = send_times(config.load, config.total_s, config.arrivals, rng)
    payloads = build_payloads(config.payload, times, config.seed)
    # Letters only: digits next to the slot number could make a 12+ digit run that the
    # endpoint rejects when it passes the Luhn check (a card number in an id).
    tag = run_tag or "".join(secrets.choice(string.ascii_lowercase) for _ in range(8))
    base_ms = time.time_ns() // 1_000_000
    head = request_head(base_url, config.target.path, config.target.headers)
    requests = [post_request(head, body) for body in payloads.bodies(times, tag, base_ms)]
    return Plan(times, requests, payloads.expect_422, payloads.counts())


def execute(
    config: LoadTestConfig, base_url: str, the_plan: Plan, progress: Progress | None = None
) -> RunResult:
    recorder = Recorder(the_plan.times_s, the_plan.expect_422, config.warmup_s)
    runner = OpenLoopRunner(
        base_url,
        the_plan.requests,
        the_plan.times_s,
        recorder,
        connections=config.client.connections,
        max_in_flight=config.client.max_in_flight,
        timeout_s=config.target.timeout_s,
    )

    async def main() -> RunResult:
        if progress is None:
            return await runner.run()
        task = asyncio.create_task(runner.run())
        while not task.done():
            await asyncio.wait({task}, timeout=0.25)
            progress(runner.dispatched, recorder.finished, len(the_plan.times_s))
        return task.result()

    return uvloop.run(main())


def run_loadtest(
    config: LoadTestConfig,
    stack: StackConfig,
    name: str,
    out: Path,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run, write `report.json` and the charts into `out`; the report (with `out` added)."""
    base_url = config.target.base_url(stack)
    the_plan = plan(config, base_url)
    result = execute(config, base_url, the_plan, progress)
    report = build_report(
        config,
        result,
        name=name,
        target=base_url + config.target.path,
        payload_kinds=the_plan.payload_kinds,
    )
    out.mkdir(parents=True, exist_ok=True)
    charts = write_charts(result.recorder, config.total_s, config.warmup_s, out)
    report["out"] = str(out)
    report["charts"] = [str(p) for p in charts if p.suffix == ".html"]
    (out / "report.json").write_bytes(dumps(report))
    (out / "latency.hdr").write_bytes(result.recorder.histogram.encode())
    return report
