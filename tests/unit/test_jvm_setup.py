"""Which Java the stack picks, and the jar lock that `make setup` checks (jvm/resolve.py)."""

from __future__ import annotations

import importlib.util
import stat
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

from core.jvm import find_java

REPO = Path(__file__).resolve().parents[2]


def fake_java(bin_dir: Path, version_line: str) -> Path:
    bin_dir.mkdir(parents=True)
    java = bin_dir / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    return java


def load_resolver() -> ModuleType:
    spec = importlib.util.spec_from_file_location("resolve", REPO / "jvm" / "resolve.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_java_home_wins_over_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_java(tmp_path / "path", 'openjdk version "11.0.2" 2019-01-15')
    home_java = fake_java(tmp_path / "home" / "bin", 'openjdk version "21.0.5" 2024-10-15')
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "home"))
    java = find_java()
    assert (java.path, java.source, java.version, java.major) == (
        str(home_java),
        "JAVA_HOME",
        "21.0.5",
        21,
    )


def test_path_java_when_java_home_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_java(tmp_path / "path", 'java version "1.8.0_292"')
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    java = find_java()
    assert (java.source, java.major) == ("PATH", 8)


def test_no_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "missing"))
    assert find_java().major is None


def test_lock_pins_both_sets_with_the_connector_for_the_installed_pyspark() -> None:
    resolver = load_resolver()
    pinned = resolver.read_lock()
    assert len(pinned["kafka"]) > 50
    assert set(pinned["spark-kafka"]) == {
        "spark-sql-kafka-0-10_2.13-4.2.0.jar",
        "spark-token-provider-kafka-0-10_2.13-4.2.0.jar",
        "kafka-clients-3.9.2.jar",
        "commons-pool2-2.13.1.jar",
    }


def test_lock_check_names_every_difference(tmp_path: Path) -> None:
    resolver = load_resolver()
    (tmp_path / "a.jar").write_bytes(b"a")
    (tmp_path / "extra.jar").write_bytes(b"x")
    pinned = {"a.jar": "0" * 40, "gone.jar": "1" * 40}
    problems = resolver.check_against_lock("kafka", tmp_path, pinned)
    assert [p.split(":")[0] for p in problems] == [
        "not in jars.lock",
        "pinned but not retrieved",
        "SHA-1 mismatch",
    ]
    assert resolver.check_against_lock("kafka", tmp_path, {}) != []
    exact = {p.name: resolver.sha1(p) for p in tmp_path.iterdir()}
    assert resolver.check_against_lock("kafka", tmp_path, exact) == []


def test_mirror_set_is_connect_mirror_at_the_broker_version() -> None:
    """MirrorMaker 2 runs on the kafka set's classpath, so its two jars must match the broker."""

    def revs(set_name: str) -> dict[str, str]:
        tree = ET.parse(REPO / "jvm" / f"{set_name}.ivy.xml")
        return {d.attrib["name"]: d.attrib["rev"] for d in tree.iter("dependency")}

    broker = revs("kafka")["kafka_2.13"]
    assert revs("kafka-mirror") == {"connect-mirror": broker, "connect-mirror-client": broker}
    pinned = load_resolver().read_lock()
    assert set(pinned["kafka-mirror"]) == {
        f"connect-mirror-{broker}.jar",
        f"connect-mirror-client-{broker}.jar",
    }
    assert f"connect-runtime-{broker}.jar" in pinned["kafka"]
