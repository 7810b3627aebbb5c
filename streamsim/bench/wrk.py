"""`wrk` (Debian's, /usr/bin/wrk) as a second load generator against the same endpoint.

`wrk_saturate` runs wrk closed-loop (`connections` connections over `threads` threads) with
`wrk_transactions.lua`: bodies from the same payload pool as our generator, each with a fresh
transaction_id and the wall-clock event time (second resolution: Lua's os.time). A warm-up run
first, unmeasured; then the measured one. Its figures come back as a `Saturation` (latency
percentiles from wrk's own histogram, corrected for coordinated omission as wrk does; errors:
non-2xx answers plus socket errors), with wrk's CPU time (children's rusage) as the client's.
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import time
from pathlib import Path

import orjson

from core.errors import StreamsimError
from streamsim.bench.bare_app import PATH
from streamsim.loadtest.closed_loop import Saturation
from streamsim.loadtest.payloads import PayloadSet

SCRIPT = Path(__file__).with_name("wrk_transactions.lua")
MARK = "WRK_JSON "
ID_SLOT = "@ID@"
TIME_SLOT = 999_999_999_999_999  # an event time no body has: replaced by @TS@ in the file


def wrk_path() -> str:
    found = shutil.which("wrk")
    if found is None:
        raise StreamsimError("wrk is not installed (Debian: apt-get install wrk)")
    return found


def write_bodies(path: Path, payloads: PayloadSet, count: int = 5_000) -> Path:
    """`count` bodies of the pool, one a line, with the script's slots."""
    lines = []
    for i in range(min(count, len(payloads))):
        body = payloads.body(i, ID_SLOT, TIME_SLOT)
        lines.append(body.replace(str(TIME_SLOT).encode(), b"@TS@"))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def parse(output: str) -> dict[str, int]:
    for line in output.splitlines():
        if line.startswith(MARK):
            parsed: dict[str, int] = orjson.loads(line[len(MARK) :])
            return parsed
    raise StreamsimError(f"no {MARK.strip()} line in wrk's output:\n{output[-2000:]}")


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(
    url: str, bodies: Path, prefix: str, connections: int, threads: int, seconds: float
) -> str:
    command = [
        wrk_path(),
        f"-t{threads}",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        "--latency",
        "--timeout",
        "10s",
        "-s",
        str(SCRIPT),
        url + PATH,
        "--",
        prefix,
        str(bodies),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60)
    if done.returncode != 0:
        raise StreamsimError(f"wrk failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout


def wrk_saturate(
    url: str,
    bodies: Path,
    prefix: str,
    *,
    connections: int,
    threads: int,
    warmup_s: float,
    duration_s: float,
) -> Saturation:
    cpu_before, started = _children_cpu_s(), time.monotonic()
    warm = (
        parse(_run(url, bodies, f"{prefix}w", connections, threads, warmup_s)) if warmup_s else {}
    )
    out = parse(_run(url, bodies, f"{prefix}m", connections, threads, duration_s))
    elapsed = time.monotonic() - started
    errors = out["status"] + out["connect"] + out["read"] + out["write"] + out["timeout"]
    seconds = out["duration_us"] / 1e6
    return Saturation(
        requests=out["requests"],
        requests_per_s=out["requests"] / seconds if seconds else 0.0,
        latency_ms={
            "p50": out["p50_us"] / 1000,
            "p90": out["p90_us"] / 1000,
            "p99": out["p99_us"] / 1000,
            "max": out["max_us"] / 1000,
        },
        statuses={},
        errors=errors,
        total_requests=out["requests"] + warm.get("requests", 0),
        client_cpu_s=_children_cpu_s() - cpu_before,
        elapsed_s=elapsed,
    )
