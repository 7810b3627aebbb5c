"""A real Spark standalone cluster: a master and a worker started with PySpark's own
`spark-class` (separate JVMs, 1 core, 1g), and `window-counts` run against `spark://` as a
`streamsim pipeline run` process, giving the same counts as `local[*]` on the same seed.

The executors read Kafka themselves, so this proves the connector jars (`spark.jars`) reach
them; the project's Python packages reach them through `spark.submit.pyFiles`.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pyspark
import pytest
import yaml
from confluent_kafka import Producer

from core.config import StackConfig
from core.jvm import java_executable
from core.kafka import ensure_topics, producer_config
from core.kafka.reader import read_topic
from tests.conftest import REPO_ROOT, free_port

pytestmark = pytest.mark.integration
SPARK_HOME = Path(pyspark.__file__).parent


def spark_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    java = java_executable()
    assert java is not None, "Java is needed for Spark"
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        JAVA_HOME=env.get("JAVA_HOME") or str(Path(java).resolve().parent.parent),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_WORKER_DIR=str(tmp / "work"),
        SPARK_LOG_DIR=str(tmp / "logs"),
        PYSPARK_PYTHON=sys.executable,
    )
    return env


def master_state(ui_port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as reply:
        return dict(json.loads(reply.read()))


@pytest.fixture(scope="module")
def spark_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, int, Path]]:
    """spark://127.0.0.1:PORT with one worker (1 core, 1g), the master's web UI port, and the
    worker's directory (one folder per application and executor)."""
    tmp = tmp_path_factory.mktemp("spark-cluster")
    env = spark_env(tmp)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port, ui, worker_ui = free_port(), free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    logs = [open(tmp / f"{name}.log", "wb") for name in ("master", "worker")]  # noqa: SIM115
    master = subprocess.Popen(
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        ],
        env=env,
        stdout=logs[0],
        stderr=subprocess.STDOUT,
    )
    worker = subprocess.Popen(
        [
            spark_class,
            "org.apache.spark.deploy.worker.Worker",
            url,
            "--host",
            "127.0.0.1",
            "--cores",
            "1",
            "--memory",
            "1g",
            "--webui-port",
            str(worker_ui),
            "--work-dir",
            str(tmp / "work"),
        ],
        env=env,
        stdout=logs[1],
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        alive = 0
        while time.monotonic() < deadline and not alive:
            assert master.poll() is None, (tmp / "master.log").read_text()[-2000:]
            assert worker.poll() is None, (tmp / "worker.log").read_text()[-2000:]
            with contextlib.suppress(OSError):
                alive = int(master_state(ui).get("aliveworkers", 0))
            time.sleep(1)
        assert alive == 1, "the worker did not register with the master"
        yield url, ui, tmp / "work"
    finally:
        for process in (worker, master):
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        for log in logs:
            log.close()


def package_zip(tmp: Path) -> Path:
    """The project's packages as one zip for the executors (`spark.submit.pyFiles`)."""
    out = tmp / "streamsim-packages.zip"
    done = subprocess.run(
        [sys.executable, "-m", "streamsim", "pipeline", "package", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


def run_job(tmp: Path, kafka: StackConfig, master: str, topic: str, zip_path: Path) -> str:
    """`streamsim pipeline run window-counts` with `master`, to an output topic of its own."""
    name = "cluster" if master.startswith("spark://") else "local"
    output = f"aggregates.counts-{name}-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka, [output, f"deadletter-{name}"])
    conf = {"spark.executor.memory": "768m", "spark.cores.max": "1"}
    if master.startswith("spark://"):
        conf |= {"spark.driver.host": "127.0.0.1", "spark.submit.pyFiles": str(zip_path)}
    stack = tmp / f"stack-{name}.yaml"
    stack.write_text(
        yaml.safe_dump(
            {
                "kafka": {"local": kafka.kafka.local.model_dump(mode="json")},
                "spark": {
                    "master": master,
                    "shuffle_partitions": 2,
                    "driver_memory": "1g",
                    "conf": conf,
                },
                "dirs": {
                    "cache": str(REPO_ROOT / ".cache"),
                    "data": str(tmp / name),
                    "checkpoints": str(tmp / name / "checkpoints"),
                    "lake": str(tmp / name / "lake"),
                },
            }
        )
    )
    pipeline = tmp / f"pipeline-{name}.yaml"
    pipeline.write_text(
        yaml.safe_dump(
            {
                "kind": "pipeline",
                "job": "window-counts",
                "input_topics": [topic],
                "output_topic": output,
                "deadletter_topic": f"deadletter-{name}",
                "entity_key": "sensor_id",
                "watermark": "30 seconds",
                "window": "1 minute",
                "trigger": {"mode": "available_now"},
            }
        )
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "streamsim",
            "pipeline",
            "run",
            "window-counts",
            "--pipeline",
            str(pipeline),
            "--config",
            str(stack),
            "--duration",
            "400",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=500,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return output


def test_window_counts_on_a_standalone_cluster_match_local(
    kafka_stack: StackConfig, spark_cluster: tuple[str, int, Path], tmp_path: Path
) -> None:
    url, ui, work = spark_cluster
    out = tmp_path / "sim"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "streamsim",
            "simulate",
            "config/scenarios/sensor_fleet.yaml",
            "--seed",
            "7",
            "--events",
            "4000",
            "--speed",
            "max",
            "--sink",
            "jsonl",
            "--out",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    topic = f"test.readings-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_stack, [topic])
    producer = Producer(producer_config(kafka_stack))
    lines = (out / "events.jsonl").read_bytes().splitlines()
    for line in lines:
        producer.produce(topic, line, key=orjson.loads(line)["sensor_id"])
    assert producer.flush(60) == 0

    zip_path = package_zip(tmp_path)
    on_cluster = run_job(tmp_path, kafka_stack, url, topic, zip_path)
    on_local = run_job(tmp_path, kafka_stack, "local[2]", topic, zip_path)

    def counts(output: str) -> dict[tuple[str, int], int]:
        rows = read_topic(kafka_stack, output)
        keyed = {(r["entity_id"], r["window_start"]): r["events"] for r in rows}
        assert len(keyed) == len(rows)  # each window once
        return keyed

    cluster_counts, local_counts = counts(on_cluster), counts(on_local)
    assert cluster_counts  # windows closed and were written
    assert cluster_counts == local_counts
    assert sum(local_counts.values()) <= len(lines)
    # the job really ran on the standalone cluster: the master lists it as an application
    state = master_state(ui)
    apps = state.get("activeapps", []) + state.get("completedapps", [])
    assert any(app["name"] == "streamsim-window-counts" for app in apps)
    # and its executor got the connector jars and the packages zip from the driver
    shipped = {p.name for p in work.glob("app-*/*/*")}
    assert "streamsim-packages.zip" in shipped
    assert any(name.startswith("spark-sql-kafka") for name in shipped)
