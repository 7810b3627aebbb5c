"""Where the JVM artifacts live and how to run Java. `make setup` resolves them with Maven."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from core.config import StackConfig

RESOLVE_HINT = "run `make setup` (resolves the jars from Maven Central into .cache/jars)"
MIN_JAVA = 17


def kafka_jars_dir(stack: StackConfig) -> Path:
    return stack.dirs.cache / "jars" / "kafka"


def spark_kafka_jars(stack: StackConfig) -> list[Path]:
    return sorted((stack.dirs.cache / "jars" / "spark-kafka").glob("*.jar"))


def kafka_classpath(stack: StackConfig) -> str:
    jars = kafka_jars_dir(stack)
    if not any(jars.glob("kafka_2.13-*.jar")):
        raise FileNotFoundError(f"no Kafka broker jars in {jars}: {RESOLVE_HINT}")
    return str(jars.resolve() / "*")


def java_executable() -> str | None:
    return shutil.which("java")


def java_major_version() -> int | None:
    java = java_executable()
    if java is None:
        return None
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major
