"""Kafka's own producer benchmark (`ProducerPerformance` from kafka-tools) as the reference.

It is fed the same records the subject sends (`--payload-file`), with the same producer settings,
so record size and compressibility match.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.config import StackConfig
from core.errors import StreamsimError
from core.jvm import JAVA_HINT, java_executable, kafka_classpath

MAIN_CLASS = "org.apache.kafka.tools.ProducerPerformance"
# librdkafka names that the Java producer spells differently or does not have.
_JAVA_NAMES = {
    "linger.ms": "linger.ms",
    "batch.size": "batch.size",
    "acks": "acks",
    "compression.type": "compression.type",
    "enable.idempotence": "enable.idempotence",
}
_SUMMARY = re.compile(
    r"(?P<records>\d+) records sent, (?P<rate>[\d.]+) records/sec .*?"
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, "
    r"(?P<p50>\d+) ms 50th, (?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th"
)


@dataclass(frozen=True)
class PerfResult:
    records: int
    records_per_s: float
    latency_ms: dict[str, float]


def java_producer_props(librdkafka: dict[str, Any]) -> list[str]:
    props = [
        f"{_JAVA_NAMES[k]}={str(v).lower()}" for k, v in librdkafka.items() if k in _JAVA_NAMES
    ]
    return [*props, "max.in.flight.requests.per.connection=5"]


def run_producer_perf(
    stack: StackConfig, topic: str, records: int, payload_file: Path, producer: dict[str, Any]
) -> PerfResult:
    java = java_executable()
    if java is None:
        raise StreamsimError(f"no Java found (JAVA_HOME, else PATH): {JAVA_HINT}")
    command = [
        java,
        "-Xmx1g",
        "-cp",
        kafka_classpath(stack),
        MAIN_CLASS,
        "--bootstrap-server",
        stack.kafka.bootstrap_servers,
        "--topic",
        topic,
        "--num-records",
        str(records),
        "--throughput",
        "-1",
        "--payload-file",
        str(payload_file),
        "--command-property",
        *java_producer_props(producer),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    match = _SUMMARY.search(result.stdout.strip().splitlines()[-1] if result.stdout else "")
    if result.returncode != 0 or match is None:
        raise StreamsimError(
            f"ProducerPerformance failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
        )
    return PerfResult(
        records=int(match["records"]),
        records_per_s=float(match["rate"]),
        latency_ms={"p50": float(match["p50"]), "p99": float(match["p99"])},
    )
