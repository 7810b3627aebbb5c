"""The platform CLI as a user runs it: a real process, a real broker, real exit codes."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import orjson
import psutil
import pytest

from core.config import load_stack
from streamsim.kafka.broker import LocalBroker
from tests.conftest import REPO_ROOT, STREAMSIM, free_port

pytestmark = pytest.mark.integration


def run(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [STREAMSIM, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=REPO_ROOT,
    )


def last_json(stdout: str) -> dict:
    return orjson.loads(stdout.strip().splitlines()[-1])


@pytest.fixture
def stack_file(tmp_path: Path) -> Path:
    path = tmp_path / "stack.yaml"
    path.write_text(
        f"kafka:\n  local:\n    port: {free_port()}\n    controller_port: {free_port()}\n"
        f"dirs:\n  cache: {REPO_ROOT / '.cache'}\n  data: {tmp_path / 'data'}\n"
    )
    return path


def port_of(stack_file: Path) -> int:
    """The broker port `stack_file` sets."""
    return int(stack_file.read_text().split("port: ")[1].split()[0])


def test_config_check_broken_file_exits_2_naming_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "stack.yaml"
    bad.write_text("kafka:\n  topics:\n    partitions: 0\n")
    result = run("config", "check", str(bad))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "key 'kafka.topics.partitions' has bad value 0" in result.stderr
    assert str(bad) in result.stderr


def test_config_check_prints_resolved_defaults() -> None:
    result = run("config", "check", "config/stack.yaml", "--json")
    assert result.returncode == 0, result.stderr
    report = last_json(result.stdout)
    assert report["kind"] == "stack"
    assert report["resolved"]["kafka"]["local"]["controller_port"] == 9093
    assert report["resolved"]["spark"]["master"] == "local[*]"


def test_kafka_up_status_down(stack_file: Path) -> None:
    up = run("kafka", "up", "--config", str(stack_file), "--json")
    assert up.returncode == 0, up.stderr
    try:
        status = last_json(run("kafka", "status", "--config", str(stack_file), "--json").stdout)
        assert set(status) == {"running", "bootstrap", "pid", "log"}
        assert status["running"] is True
        assert psutil.pid_exists(status["pid"])
        assert Path(status["log"]).exists()
        doctor = last_json(run("doctor", "--config", str(stack_file), "--json").stdout)
        assert doctor["checks"]["broker"]["ok"] is True
        assert set(doctor["checks"]) >= {"java", "kafka_jars", "spark_connector", "ports", "disk"}
        assert all(set(c) == {"ok", "detail", "fix"} for c in doctor["checks"].values())
        java = doctor["java"]
        assert java["source"] in {"JAVA_HOME", "PATH"} and java["major"] >= 17
        assert java["path"] in doctor["checks"]["java"]["detail"]
    finally:
        down = run("kafka", "down", "--config", str(stack_file))
    assert down.returncode == 0, down.stderr
    assert (
        not psutil.pid_exists(status["pid"]) or psutil.Process(status["pid"]).status() == "zombie"
    )
    after = last_json(run("kafka", "status", "--config", str(stack_file), "--json").stdout)
    assert after["running"] is False and after["pid"] is None


def test_kafka_up_on_a_taken_port_fails_fast_and_says_so(stack_file: Path) -> None:
    port = port_of(stack_file)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        result = run("kafka", "up", "--config", str(stack_file), timeout=30)
    assert result.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr
    # fast: it stopped before it wrote the broker's config, formatted or started a JVM
    assert not LocalBroker(load_stack(stack_file)).home.exists()
    assert "kafka.local.port" in result.stderr


def test_doctor_reports_unreachable_broker_with_fix(stack_file: Path) -> None:
    result = run("doctor", "--config", str(stack_file), "--json")
    assert result.returncode == 1
    report = last_json(result.stdout)
    assert report["ok"] is False
    bootstrap = load_stack(stack_file).kafka.bootstrap_servers
    assert bootstrap == f"127.0.0.1:{port_of(stack_file)}"
    assert report["checks"]["broker"] == {
        "ok": False,
        "detail": f"{bootstrap} does not answer",
        "fix": "streamsim kafka up",
    }
    assert report["checks"]["java"]["ok"] is True
