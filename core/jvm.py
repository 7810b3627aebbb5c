"""Where the JVM artifacts live and which Java runs them.

`make setup` resolves the jars with the Ivy inside PySpark (`jvm/resolve.py`) and checks for Java.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from core.config import StackConfig

RESOLVE_HINT = "run `make setup` (resolves the jars from Maven Central into .cache/jars)"
JAVA_HINT = "run `make setup`: it installs Java 17 as root on Debian/Ubuntu, else names the command"
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


def mirror_jars_dir(stack: StackConfig) -> Path:
    return stack.dirs.cache / "jars" / "kafka-mirror"


def mirror_classpath(stack: StackConfig) -> str:
    """MirrorMaker 2's classpath: the broker's jars plus `connect-mirror` (jvm/kafka-mirror.ivy.xml
    lists only the two jars the kafka set lacks)."""
    mirror = mirror_jars_dir(stack)
    if not any(mirror.glob("connect-mirror-*.jar")):
        raise FileNotFoundError(f"no MirrorMaker 2 jars in {mirror}: {RESOLVE_HINT}")
    return f"{kafka_classpath(stack)}{os.pathsep}{mirror.resolve() / '*'}"


@dataclass(frozen=True)
class Java:
    """The Java that Spark's launcher would run, and why that one."""

    path: str | None
    source: str  # "JAVA_HOME" or "PATH"
    version: str | None  # as `java -version` prints it, e.g. "17.0.15"
    major: int | None


def find_java() -> Java:
    """JAVA_HOME/bin/java when JAVA_HOME is set (as Spark's launcher does), else `java` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        path: str | None = str(Path(home) / "bin" / "java")
        source = "JAVA_HOME"
    else:
        path = shutil.which("java")
        source = "PATH"
    if path is None or not os.access(path, os.X_OK):
        return Java(path, source, None, None)
    out = subprocess.run([path, "-version"], capture_output=True, text=True, check=False).stderr
    match = re.search(r'version "((\d+)(?:\.(\d+))?[^"]*)"', out)
    if not match:
        return Java(path, source, None, None)
    major = int(match.group(2))
    if major == 1:
        major = int(match.group(3) or 0)
    return Java(path, source, match.group(1), major)


def java_executable() -> str | None:
    java = find_java()
    return java.path if java.version is not None else None


def java_major_version() -> int | None:
    return find_java().major
