"""`streamsim doctor`: check what the stack needs and say how to fix what is missing."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib.metadata import version

from core.config import StackConfig
from core.jvm import (
    JAVA_HINT,
    MIN_JAVA,
    RESOLVE_HINT,
    Java,
    find_java,
    kafka_jars_dir,
    mirror_jars_dir,
    spark_kafka_jars,
)
from core.kafka.admin import is_reachable
from core.ports import port_in_use
from streamsim.kafka.broker import LocalBroker

MIN_FREE_DISK_GB = 2.0


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str
    fix: str = ""


def java_reason(java: Java) -> str:
    """Why this Java: Spark's launcher takes JAVA_HOME/bin/java when JAVA_HOME is set, else PATH."""
    if java.source == "JAVA_HOME":
        return "JAVA_HOME is set"
    return "JAVA_HOME is unset, so the first java on PATH"


def java_info() -> dict[str, object]:
    """The Java the stack runs: path, version and why that one (`doctor --json` key `java`)."""
    java = find_java()
    return {**asdict(java), "reason": java_reason(java)}


def check_java(stack: StackConfig) -> Check:
    java = find_java()
    why = java_reason(java)
    if java.path is None:
        return Check(False, "java not found on PATH (JAVA_HOME is unset)", JAVA_HINT)
    if java.major is None:
        return Check(False, f"{java.path} does not run ({why})", JAVA_HINT)
    if java.major < MIN_JAVA:
        return Check(
            False, f"Java {java.version} at {java.path} ({why}); {MIN_JAVA}+ needed", JAVA_HINT
        )
    return Check(True, f"Java {java.version} at {java.path} ({why})")


def check_kafka_jars(stack: StackConfig) -> Check:
    """The broker's jars and MirrorMaker 2's (`kafka mirror`), both resolved by `make setup`."""
    jars = sorted(kafka_jars_dir(stack).glob("kafka_2.13-*.jar"))
    if not jars:
        return Check(False, f"no broker jars in {kafka_jars_dir(stack)}", RESOLVE_HINT)
    mirror = sorted(mirror_jars_dir(stack).glob("connect-mirror-[0-9]*.jar"))
    if not mirror:
        return Check(False, f"no MirrorMaker 2 jars in {mirror_jars_dir(stack)}", RESOLVE_HINT)
    return Check(True, f"{jars[-1].name}, {mirror[-1].name}")


def check_spark_connector(stack: StackConfig) -> Check:
    spark_version = version("pyspark")
    wanted = f"spark-sql-kafka-0-10_2.13-{spark_version}.jar"
    names = [j.name for j in spark_kafka_jars(stack)]
    if wanted not in names:
        found = ", ".join(n for n in names if n.startswith("spark-sql-kafka")) or "none"
        return Check(
            False,
            f"{wanted} (for PySpark {spark_version}) not cached; found: {found}",
            RESOLVE_HINT,
        )
    return Check(True, wanted)


def check_ports(stack: StackConfig) -> Check:
    broker_running = not stack.kafka.external and LocalBroker(stack).status().running
    ports = {
        "api.port": (stack.api.host, stack.api.port),
        "ui.port": (stack.ui.host, stack.ui.port),
    }
    if not stack.kafka.external and not broker_running:
        local = stack.kafka.local
        ports["kafka.local.port"] = (local.host, local.port)
        ports["kafka.local.controller_port"] = (local.host, local.controller_port)
    taken = [f"{key}={port}" for key, (host, port) in ports.items() if port_in_use(host, port)]
    if taken:
        return Check(
            False,
            "in use: " + ", ".join(taken),
            "stop what holds them, or set other ports in the stack config",
        )
    return Check(True, "free: " + ", ".join(f"{p}" for _, p in ports.values()))


def check_disk(stack: StackConfig) -> Check:
    where = stack.dirs.data if stack.dirs.data.exists() else stack.dirs.data.resolve().parent
    while not where.exists():
        where = where.parent
    free_gb = shutil.disk_usage(where).free / 1e9
    if free_gb < MIN_FREE_DISK_GB:
        return Check(
            False,
            f"{free_gb:.1f} GB free at {where}",
            f"free space or set dirs.data elsewhere (need {MIN_FREE_DISK_GB} GB)",
        )
    return Check(True, f"{free_gb:.0f} GB free at {where}")


def check_broker(stack: StackConfig) -> Check:
    bootstrap = stack.kafka.bootstrap_servers
    if is_reachable(stack, timeout_s=3.0):
        return Check(True, f"{bootstrap} answers metadata requests")
    fix = (
        "check kafka.bootstrap / STREAMSIM_KAFKA_BOOTSTRAP and the network"
        if stack.kafka.external
        else "streamsim kafka up"
    )
    return Check(False, f"{bootstrap} does not answer", fix)


CHECKS: dict[str, Callable[[StackConfig], Check]] = {
    "java": check_java,
    "kafka_jars": check_kafka_jars,
    "spark_connector": check_spark_connector,
    "ports": check_ports,
    "disk": check_disk,
    "broker": check_broker,
}


def run_checks(stack: StackConfig) -> dict[str, dict[str, object]]:
    return {name: asdict(check(stack)) for name, check in CHECKS.items()}
