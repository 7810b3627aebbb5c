"""`bench api`: the fraud endpoint's saturation throughput vs a bare FastAPI endpoint, same run.

Method:
- Three servers on the stack's api host, each its own process on a free port: the subject
  (`streamsim api --service fraud --no-access-log`: the endpoint as its own service, without
  the panel's consumers; a fresh activity topic on the stack's broker), the
  reference (`streamsim.bench.bare_app`: same uvicorn settings) and a canned-response server
  (`streamsim.bench.canned_server`) that only measures the load generator.
- The bodies: the default load-test payload mix without invalid ones (a pool of
  `POOL_BODIES` different bodies), each request stamped with a fresh transaction_id and the
  wall-clock event time, so the subject decides every request (no idempotent replays). The
  reference gets the same bodies.
- Closed loop at saturation (`loadtest.closed_loop`): `connections` keep-alive connections,
  each sending its next request when the previous answer arrives, `warmup_s` unmeasured then
  `duration_s` measured. Rounds alternate subject, reference (ABAB...); medians reported.
- The generator's ceiling: the same closed loop against the canned server, once.
- Before each run every server is let go idle (under 5% of a core), so a round never pays
  for the other server's background work (the subject's updater applying what it published).
- peak_rss_mb: the subject process's peak resident set (wait4 rusage when it exits).
- server_cpu_us_per_request: each server process's CPU time (all threads) over a run divided
  by the answers in it: the cost per request without the machine's other load.
- `durability`: the subject's `durability` setting (`api.fraud.durability`; unset: its
  default), so each mode's cost can be measured.
- `generator`: `ours` (the closed loop above), `wrk` (`streamsim.bench.wrk`: Debian's wrk with
  a Lua script for the bodies, in place of ours) or `both` (ours for the main figures, and a
  `wrk` section with wrk's rounds against the same two servers right after ours, each round).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import httpx
import numpy as np
import psutil
import uvloop

from core.config import StackConfig
from core.errors import StreamsimError
from core.kafka.admin import delete_topics
from core.ports import free_port
from runs.process import spawn
from streamsim.bench.bare_app import PATH
from streamsim.bench.report import BenchReport
from streamsim.bench.wrk import write_bodies, wrk_saturate
from streamsim.loadtest.closed_loop import Saturation, saturate
from streamsim.loadtest.config import PayloadMix
from streamsim.loadtest.connection import post_request, request_head
from streamsim.loadtest.payloads import PayloadSet, build_payloads, id_tag
from streamsim.stackfile import write_stack_file

POOL_BODIES = 50_000
Generator = Literal["ours", "wrk", "both"]
READY_TIMEOUT_S = 90.0


class ServerProcess:
    """A server child process; its output goes to a log file."""

    def __init__(self, name: str, command: list[str], log: Path, env: dict[str, str]) -> None:
        self.name = name
        self.log = log
        with log.open("ab") as out:
            self.proc = spawn(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.peak_rss_mb: float | None = None

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise StreamsimError(
                f"the {self.name} server exited ({self.proc.returncode}):\n{self.tail()}"
            )

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (a graceful stop for uvicorn and the canned server; SIGINT may be ignored by
        a background child), wait, reaping it with wait4 for its peak RSS; SIGKILL if it
        hangs."""
        if self.proc.returncode is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                self.peak_rss_mb = usage.ru_maxrss / 1024
                return
            time.sleep(0.05)
        self.proc.kill()
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.peak_rss_mb = usage.ru_maxrss / 1024


def wait_ready(server: ServerProcess, probe: Callable[[], bool]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        server.check_alive()
        try:
            if probe():
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise StreamsimError(f"the {server.name} server was not ready after {READY_TIMEOUT_S:.0f} s")


class RequestStream:
    """Requests from a body pool, each with a fresh transaction_id and the wall-clock time."""

    def __init__(self, url: str, payloads: PayloadSet) -> None:
        self.head = request_head(url, PATH)
        self.payloads = payloads
        self.size = len(payloads)
        self.prefix = f"bench-{id_tag()}-"
        self.count = 0

    def __call__(self) -> bytes:
        k = self.count
        self.count += 1
        body = self.payloads.body(k % self.size, f"{self.prefix}{k}", time.time_ns() // 1_000_000)
        return post_request(self.head, body)


def bench_payloads(seed: int = 1) -> PayloadSet:
    mix = PayloadMix(invalid_share=0.0)
    times = np.arange(POOL_BODIES, dtype=np.float64) / 1000.0  # spreads incidents as at 1k/s
    return build_payloads(mix, times, seed)


def _saturate(url: str, stream: Callable[[], bytes], **kwargs: Any) -> Saturation:
    return uvloop.run(saturate(url, stream, **kwargs))


def _server_cpu_s(server: ServerProcess) -> float:
    """The server process's CPU time so far, all threads (librdkafka's included)."""
    times = psutil.Process(server.proc.pid).cpu_times()
    return float(times.user + times.system)


def _wait_idle(server: ServerProcess, max_s: float = 15.0) -> None:
    """Until the server uses under 5% of a core (the subject's updater applies the records it
    just published; the other server's round must not pay for that)."""
    deadline = time.monotonic() + max_s
    before = _server_cpu_s(server)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = _server_cpu_s(server)
        if now - before < 0.025:
            return
        before = now


def bench_api(
    stack: StackConfig,
    *,
    connections: int = 32,
    warmup_s: float = 3.0,
    duration_s: float = 10.0,
    rounds: int = 2,
    durability: str | None = None,
    generator: Generator = "ours",
    wrk_threads: int = 1,
    settings: dict[str, str] | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> BenchReport:
    host = stack.api.host
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="streamsim-bench-api-") as tmp:
        work = Path(tmp)
        subject_port, reference_port, canned_port = (free_port(host) for _ in range(3))
        subject_stack = stack.model_copy(
            update={"api": stack.api.model_copy(update={"port": subject_port})}
        )
        stack_file = work / "stack.yaml"
        child_env = write_stack_file(subject_stack, stack_file)  # client secrets by env only
        settings_file = work / "api.yaml"
        topic = f"bench.cards-activity-{uuid.uuid4().hex[:8]}"
        settings_file.write_text(
            f"kind: api\ntopic: {topic}\nrebuild_timeout_s: 30\n"
            + (f"durability: {durability}\n" if durability else "")
            + "".join(f"{key}: {value}\n" for key, value in (settings or {}).items())
        )
        env = {
            **child_env,
            "STREAMSIM_PAN_SECRET": f"bench-api-{secrets.token_hex(16)}",
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("STREAMSIM_API_PORT", None)  # the subject's port is the bench's choice
        python = sys.executable
        servers = {
            "subject": ServerProcess(
                "subject",
                [
                    python,
                    "-m",
                    "streamsim",
                    "api",
                    "--config",
                    str(stack_file),
                    "--settings",
                    str(settings_file),
                    "--no-access-log",
                    "--service",
                    "fraud",
                ],
                work / "subject.log",
                env,
            ),
            "reference": ServerProcess(
                "reference",
                [python, "-m", "streamsim.bench.bare_app", host, str(reference_port)],
                work / "reference.log",
                env,
            ),
            "canned": ServerProcess(
                "canned",
                [python, "-m", "streamsim.bench.canned_server", host, str(canned_port)],
                work / "canned.log",
                env,
            ),
        }
        urls = {
            "subject": f"http://{host}:{subject_port}",
            "reference": f"http://{host}:{reference_port}",
            "canned": f"http://{host}:{canned_port}",
        }
        try:
            progress("building request bodies")
            payloads = bench_payloads()
            progress("starting the servers")
            _wait_all(servers, urls, payloads)
            runs: dict[str, list[Saturation]] = {"subject": [], "reference": []}
            cpu_per_request: dict[str, list[float]] = {"subject": [], "reference": []}
            options = {
                "connections": connections,
                "warmup_s": warmup_s,
                "duration_s": duration_s,
            }
            progress("generator ceiling (canned server)")
            ceiling = _saturate(
                urls["canned"],
                RequestStream(urls["canned"], payloads),
                connections=connections,
                warmup_s=1.0,
                duration_s=min(duration_s, 5.0),
            )
            streams = {name: RequestStream(urls[name], payloads) for name in runs}
            bodies = write_bodies(work / "wrk-bodies.txt", payloads)
            wrk_runs: dict[str, list[Saturation]] = {"subject": [], "reference": []}

            def with_wrk(name: str, r: int) -> Saturation:
                return wrk_saturate(
                    urls[name],
                    bodies,
                    f"wrk-{id_tag()}-{r}",
                    connections=connections,
                    threads=wrk_threads,
                    warmup_s=warmup_s,
                    duration_s=duration_s,
                )

            for r in range(rounds):
                for name in ("subject", "reference"):
                    progress(f"round {r + 1}/{rounds}: {name}")
                    servers[name].check_alive()
                    for server in servers.values():
                        _wait_idle(server)
                    cpu_before = _server_cpu_s(servers[name])
                    if generator == "wrk":
                        run = with_wrk(name, r)
                    else:
                        run = _saturate(urls[name], streams[name], **options)
                    cpu = _server_cpu_s(servers[name]) - cpu_before
                    runs[name].append(run)
                    cpu_per_request[name].append(cpu / max(run.total_requests, 1))
                    if generator == "both":
                        progress(f"round {r + 1}/{rounds}: {name}, wrk")
                        for server in servers.values():
                            _wait_idle(server)
                        wrk_runs[name].append(with_wrk(name, r))
        except BaseException:
            for server in servers.values():
                server.stop()
            raise
        for server in servers.values():
            server.stop()
        subject_log = servers["subject"].tail()
        with contextlib.suppress(Exception):  # a leftover topic is harmless
            delete_topics(stack, [topic], timeout_s=10)
    return _report(
        runs,
        ceiling,
        cpu_per_request,
        servers["subject"].peak_rss_mb,
        connections=connections,
        warmup_s=warmup_s,
        duration_s=duration_s,
        payloads=payloads,
        load=(load_before, os.getloadavg()),
        subject_log=subject_log,
        durability=durability,
        generator=generator,
        settings=settings,
        wrk_runs=wrk_runs if generator == "both" else None,
        wrk_threads=wrk_threads,
    )


def _wait_all(
    servers: dict[str, ServerProcess], urls: dict[str, str], payloads: PayloadSet
) -> None:
    body = RequestStream(urls["reference"], payloads).payloads.body(0, "bench-probe", 1)
    headers = {"content-type": "application/json"}

    def posts(url: str) -> Callable[[], bool]:
        def probe() -> bool:
            return (
                httpx.post(url + PATH, content=body, headers=headers, timeout=2).status_code == 200
            )

        return probe

    def live() -> bool:
        health = httpx.get(urls["subject"] + "/v1/health", timeout=5).json()
        return bool(health["state"]["status"] == "live")

    wait_ready(servers["reference"], posts(urls["reference"]))
    wait_ready(servers["canned"], posts(urls["canned"]))
    wait_ready(servers["subject"], live)
    if not posts(urls["subject"])():
        raise StreamsimError(f"the subject rejected a valid body:\n{servers['subject'].tail()}")


def _report(
    runs: dict[str, list[Saturation]],
    ceiling: Saturation,
    cpu_per_request: dict[str, list[float]],
    peak_rss_mb: float | None,
    *,
    connections: int,
    warmup_s: float,
    duration_s: float,
    payloads: PayloadSet,
    load: tuple[tuple[float, float, float], tuple[float, float, float]],
    subject_log: str,
    durability: str | None = None,
    generator: Generator = "ours",
    settings: dict[str, str] | None = None,
    wrk_runs: dict[str, list[Saturation]] | None = None,
    wrk_threads: int = 1,
) -> BenchReport:
    subject, reference = runs["subject"], runs["reference"]
    if any(run.requests == 0 for run in subject):
        raise StreamsimError(f"the subject answered nothing in a round:\n{subject_log}")

    def median(values: list[float]) -> float:
        return round(float(statistics.median(values)), 3)

    def rounded(values: list[float]) -> list[float]:
        return [round(v, 1) for v in values]

    def client_cores(run: Saturation) -> float:
        return round(run.client_cpu_s / run.elapsed_s, 2)

    now_ms = time.time_ns() // 1_000_000
    sample = range(min(len(payloads), 5000))
    body_bytes = float(
        np.mean([len(payloads.body(i, f"bench-00000000-{i}", now_ms)) for i in sample])
    )
    return BenchReport(
        subject="fraud endpoint POST /v1/transactions",
        rate_key="requests_per_s",
        rate=median([r.requests_per_s for r in subject]),
        reference="bare FastAPI endpoint (pydantic body, same uvicorn settings)",
        reference_rate=median([r.requests_per_s for r in reference]),
        latency_ms={
            "p50": median([r.latency_ms["p50"] for r in subject]),
            "p99": median([r.latency_ms["p99"] for r in subject]),
        },
        peak_rss_mb=peak_rss_mb,
        extra={
            "rounds": len(subject),
            "connections": connections,
            "warmup_s": warmup_s,
            "duration_s": duration_s,
            "subject_rates": rounded([r.requests_per_s for r in subject]),
            "reference_rates": rounded([r.requests_per_s for r in reference]),
            "reference_latency_ms": {
                "p50": median([r.latency_ms.get("p50", 0.0) for r in reference]),
                "p99": median([r.latency_ms.get("p99", 0.0) for r in reference]),
            },
            "errors": {
                "subject": sum(r.errors for r in subject),
                "reference": sum(r.errors for r in reference),
            },
            "server_cpu_us_per_request": {
                name: round(statistics.median(values) * 1e6, 1)
                for name, values in cpu_per_request.items()
            },
            # What the ratio would be with a core to itself per server: contention-free.
            "cpu_ratio": round(
                statistics.median(cpu_per_request["reference"])
                / statistics.median(cpu_per_request["subject"]),
                3,
            ),
            "generator_ceiling_per_s": round(ceiling.requests_per_s, 1),
            "generator_cpu_cores": {
                "subject": median([client_cores(r) for r in subject]),
                "reference": median([client_cores(r) for r in reference]),
                "canned": client_cores(ceiling),
            },
            "body_bytes": round(body_bytes, 1),
            "load_average": {"before": round(load[0][0], 2), "after": round(load[1][0], 2)},
            "cpu_count": os.cpu_count(),
            "durability": durability or "default",
            **({"settings": settings} if settings else {}),
            "generator": generator,
            **({"wrk_threads": wrk_threads} if generator != "ours" else {}),
            **({"wrk": _wrk_section(wrk_runs, median)} if wrk_runs is not None else {}),
        },
    )


def _wrk_section(
    runs: dict[str, list[Saturation]], median: Callable[[list[float]], float]
) -> dict[str, Any]:
    """wrk's rounds against the subject and the reference: medians, and the rates' ratio."""
    section: dict[str, Any] = {}
    for name, done in runs.items():
        section[name] = {
            "requests_per_s": median([r.requests_per_s for r in done]),
            "rates": [round(r.requests_per_s, 1) for r in done],
            "latency_ms": {
                "p50": median([r.latency_ms["p50"] for r in done]),
                "p99": median([r.latency_ms["p99"] for r in done]),
            },
            "errors": sum(r.errors for r in done),
            "generator_cpu_cores": median([r.client_cpu_s / r.elapsed_s for r in done]),
        }
    section["ratio"] = round(
        section["subject"]["requests_per_s"] / section["reference"]["requests_per_s"], 3
    )
    return section
