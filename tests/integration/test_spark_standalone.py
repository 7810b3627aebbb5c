"""A real Spark standalone cluster: a master and a worker started with PySpark's own
`spark-class` (separate JVMs, 1 core, 1g), one for the module, and each Spark job run against
`spark://` as a `streamsim pipeline run` process (trigger available_now: it ends when it has read
its input), giving the output a pure-Python oracle computes from the same input (the oracles
the jobs' own integration tests hold against `local[2]`, from `tests.oracles`):
- `sensors`: the window counts of the sensors scenario (seed 7), every window the
  final watermark closed and no other;
- `cards` and `vehicles`: the alert ids of the detectors' batch forms, every
  planted kind among them, on the hand-made incidents of their own integration tests;
- `shipping`: the alert ids of the batch rules on a seeded shipping run. Its processing-time
  timers keep its alerts query busy, so it runs in micro-batches with `pipeline run --drain`.

The executors read Kafka themselves, so this proves the connector jars (`spark.jars`) reach
them. The executors' Python cannot import the project from the checkout (a `sitecustomize`
takes the editable install's path out of `sys.path`), so the rules that run there, in
transformWithStateInPandas Python workers, prove that the packages zip the session ships by
itself on a cluster master (`pipeline.packaging`, nothing configured) carries `detectors/` and
`pipeline/`.
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
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pyspark
import pytest
import yaml
from confluent_kafka import Producer

from core.config import StackConfig
from core.jvm import java_executable
from core.kafka import ensure_topics, producer_config
from core.kafka.reader import read_topic
from pipeline.config import PipelineConfig
from pipeline.jobs.shipping import job as shipping
from pipeline.packaging import ZIP_NAME
from streamsim.evaluate.shipping import TOPIC_COLUMNS, frame_of, run_rules
from tests.conftest import REPO_ROOT, SPARK_JVM_OPTS, free_port
from tests.oracles import cards, vehicles
from tests.shipping_run import TOPIC, keyed_records, seeded_events, starting_after
from tests.shipping_run import produce as produce_shipping

#: A test runs a simulation (300 s at most) and a job (500 s at most): pytest's own timeout
#: comes after theirs, so a stuck command fails with its stderr.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300 + 500 + 120)]
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


def streamsim(*args: str, timeout_s: float) -> None:
    """Run `python -m streamsim ARGS` in the checkout; it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-m", "streamsim", *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=timeout_s,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]


HIDE_CHECKOUT = """import sys
from pathlib import Path

_repo, _marker = Path({repo!r}), Path({marker!r})
_kept = [p for p in sys.path if not (p and Path(p).resolve() == _repo)]
if len(_kept) < len(sys.path):
    sys.path[:] = _kept
    with _marker.open("a") as out:
        out.write("hidden\\n")
"""


@pytest.fixture(scope="module")
def no_checkout(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A PYTHONPATH entry whose `sitecustomize` drops the checkout (the editable install's
    `.pth` entry) from `sys.path`, and the file it marks each time it did."""
    folder = tmp_path_factory.mktemp("no-checkout")
    marker = folder / "hidden.log"
    (folder / "sitecustomize.py").write_text(
        HIDE_CHECKOUT.format(repo=str(REPO_ROOT), marker=str(marker))
    )
    return folder, marker


@dataclass(frozen=True)
class Cluster:
    """The module's standalone cluster and what a driver ships to its executors."""

    url: str  # spark://127.0.0.1:PORT
    ui: int  # the master's web UI port
    work: Path  # the worker's directory: one folder per application and executor
    no_checkout: Path  # the executors' PYTHONPATH
    hidden: Path  # marked each time an executor's Python started without the checkout

    def hidden_count(self) -> int:
        return self.hidden.read_text().count("hidden") if self.hidden.exists() else 0


@pytest.fixture(scope="module")
def cluster(spark_cluster: tuple[str, int, Path], no_checkout: tuple[Path, Path]) -> Cluster:
    return Cluster(*spark_cluster, *no_checkout)


Record = tuple[str, bytes]


@dataclass(frozen=True)
class Case:
    """A job and its pipeline settings around a run's own topics."""

    job: str
    settings: Callable[[str], dict[str, Any]]  # run tag -> pipeline YAML keys
    drain: bool = False  # `pipeline run --drain`, for a job whose queries are never idle


@dataclass(frozen=True)
class Alerting:
    """A job that raises alerts, its input, the kinds planted in it (`field` of an alert),
    and the alerts its detectors' batch forms raise over that input (alert id -> `field`)."""

    case: Case
    records: Callable[[], list[Record]]
    field: str
    planted: set[str]
    oracle: Callable[[], dict[str, str]]


def pipeline_config(job: str, settings: dict[str, Any]) -> PipelineConfig:
    """`job`'s pipeline settings as `run_job` writes them (the topics do not matter here)."""
    topics = {"input_topics": ["in"], "output_topic": "out", "deadletter_topic": "dead"}
    return PipelineConfig.model_validate({"job": job, **topics, **settings})


def by_id(alerts: pd.DataFrame, field: str) -> dict[str, str]:
    return {str(a["alert_id"]): str(a[field]) for a in alerts.to_dict("records")}


def sensor_records(tmp: Path) -> list[Record]:
    """4,000 sensors readings of seed 7, keyed by sensor."""
    out = tmp / "sim"
    streamsim(
        "simulate",
        "config/scenarios/sensors.yaml",
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
        timeout_s=300,
    )
    lines = (out / "events.jsonl").read_bytes().splitlines()
    return [(orjson.loads(line)["sensor_id"], line) for line in lines]


def sensors_settings(tag: str) -> dict[str, Any]:
    return {
        "output_topic": f"aggregates.counts-{tag}",
        "entity_key": "sensor_id",
        "watermark": "30 seconds",
        "window": "1 minute",
    }


def sensors_oracle(records: list[Record], tag: str) -> dict[tuple[str, int], int]:
    """Readings per sensor per 1-minute window, for each window the last watermark closes (its
    end at or before the latest event time less the watermark): all are read in one batch, so
    none is late."""
    cfg = pipeline_config("sensors", sensors_settings(tag))
    assert (cfg.window, cfg.watermark) == ("1 minute", "30 seconds")
    window_ms, watermark_ms = 60_000, 30_000
    readings = [orjson.loads(value) for _, value in records]
    closed = max(r["event_time"] for r in readings) - watermark_ms
    counts = Counter((r["sensor_id"], r["event_time"] // window_ms * window_ms) for r in readings)
    return {key: n for key, n in counts.items() if key[1] + window_ms <= closed}


ONCE = {"deadletter_trigger": {"mode": "available_now"}}  # every query of the job ends


def card_records() -> list[Record]:
    """The card job's test incidents, on time (phases 1-3), malformed records included."""
    return [
        (key, value if isinstance(value, bytes) else orjson.dumps(value))
        for key, value in cards.PHASE_1 + cards.MALFORMED + cards.PHASE_2 + cards.PHASE_3
    ]


def card_settings(tag: str) -> dict[str, Any]:
    return {
        "watermark": "45 minutes",
        "cards": {
            **ONCE,
            "profiles_topic": None,  # spending from the stream's history, as in its own test
            "features_topic": f"aggregates.card-features-{tag}",
            "feature_windows": [{"length": "1 minute"}, {"length": "10 minutes"}],
        },
    }


def card_oracle() -> dict[str, str]:
    cfg = pipeline_config("cards", card_settings("oracle"))
    return by_id(cards.oracle_alerts(cfg.cards), "rule")


def vehicle_records() -> list[Record]:
    """The vehicle job's test faults and hard negatives, on time, then the clock reading."""
    phase_1, phase_2, _, clock = vehicles.phases()
    return vehicles.as_records(phase_1) + vehicles.MALFORMED + vehicles.as_records(phase_2 + clock)


def vehicle_settings(tag: str) -> dict[str, Any]:
    return {
        "watermark": "2 minutes",
        "vehicles": {
            **ONCE,
            "stats_topic": f"aggregates.vehicle-stats-{tag}",
            "trips_topic": f"aggregates.vehicle-trips-{tag}",
            "detectors": {"battery_zscore": {"enabled": True}},
        },
    }


def vehicle_oracle() -> dict[str, str]:
    """The vectorised forms over the on-time readings (all of them: none is late here)."""
    cfg = pipeline_config("vehicles", vehicle_settings("oracle")).vehicles
    return by_id(vehicles.oracle_alerts(cfg.enabled_detectors()), "label")


ALERTING = {
    "cards": Alerting(
        Case("cards", card_settings),
        card_records,
        "rule",
        {rule for rule, _, _ in cards.EXPECTED},
        card_oracle,
    ),
    "vehicles": Alerting(
        Case("vehicles", vehicle_settings),
        vehicle_records,
        "label",
        {label for _, kinds in vehicles.FAULTS.values() for _, label in kinds},
        vehicle_oracle,
    ),
}


def produce(kafka: StackConfig, records: list[Record]) -> str:
    """`records` in order into a new topic of their own (one partition); its name."""
    topic = f"test.standalone-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka, [topic], partitions=1)
    producer = Producer(producer_config(kafka))
    for key, value in records:
        producer.produce(topic, value, key=key)
    assert producer.flush(60) == 0
    return topic


def run_job(tmp: Path, kafka: StackConfig, case: Case, topic: str, cluster: Cluster) -> str:
    """`streamsim pipeline run JOB` on the cluster over `topic` until it has read it all, with
    fresh checkpoints and output topics of its own; the alerts (or counts) topic."""
    tag = f"cluster-{uuid.uuid4().hex[:8]}"
    settings = {"output_topic": f"alerts-{tag}", **case.settings(tag)}
    ensure_topics(kafka, [settings["output_topic"], f"deadletter-{tag}"])
    conf = {
        "spark.executor.memory": "768m",
        "spark.cores.max": "1",
        "spark.driver.host": "127.0.0.1",
        "spark.executorEnv.PYTHONPATH": str(cluster.no_checkout),
        "spark.executor.extraJavaOptions": SPARK_JVM_OPTS,
    }
    data = tmp / tag
    stack = tmp / f"stack-{tag}.yaml"
    stack.write_text(
        yaml.safe_dump(
            {
                "kafka": {"local": kafka.kafka.local.model_dump(mode="json")},
                "spark": {
                    "master": cluster.url,
                    "shuffle_partitions": 2,
                    "driver_memory": "1g",
                    "conf": conf,
                },
                "dirs": {
                    "cache": str(REPO_ROOT / ".cache"),
                    "data": str(data),
                    "checkpoints": str(data / "checkpoints"),
                    "lake": str(data / "lake"),
                },
            }
        )
    )
    pipeline = tmp / f"pipeline-{tag}.yaml"
    pipeline.write_text(
        yaml.safe_dump(
            {
                "kind": "pipeline",
                "job": case.job,
                "input_topics": [topic],
                "deadletter_topic": f"deadletter-{tag}",
                "trigger": {"mode": "available_now"},
                **settings,  # a case's own inputs and trigger win
            }
        )
    )
    streamsim(
        "pipeline",
        "run",
        case.job,
        "--pipeline",
        str(pipeline),
        "--config",
        str(stack),
        *(["--drain"] if case.drain else ["--duration", "400"]),
        "--json",
        timeout_s=500,
    )
    return str(settings["output_topic"])


def assert_ran_on_the_cluster(cluster: Cluster, job: str) -> None:
    """The master lists the job as an application, and its executor got the connector jars
    and the packages zip from the driver."""
    state = master_state(cluster.ui)
    apps = state.get("activeapps", []) + state.get("completedapps", [])
    ids = [app["id"] for app in apps if app["name"] == f"streamsim-{job}"]
    assert ids, [app["name"] for app in apps]
    shipped = {p.name for app in ids for p in cluster.work.glob(f"{app}/*/*")}
    assert ZIP_NAME in shipped
    assert any(name.startswith("spark-sql-kafka") for name in shipped)


def test_sensors_on_a_standalone_cluster_match_the_oracle(
    kafka_stack: StackConfig, cluster: Cluster, tmp_path: Path
) -> None:
    records = sensor_records(tmp_path)
    topic = produce(kafka_stack, records)
    case = Case("sensors", sensors_settings)
    rows = read_topic(kafka_stack, run_job(tmp_path, kafka_stack, case, topic, cluster))
    counts = {(r["entity_id"], r["window_start"]): r["events"] for r in rows}
    assert len(counts) == len(rows)  # each window once
    expected = sensors_oracle(records, "oracle")
    assert len(expected) > 100  # windows closed and were written
    assert counts == expected
    assert_ran_on_the_cluster(cluster, "sensors")


@pytest.mark.parametrize("job", list(ALERTING))
def test_alerting_job_on_a_standalone_cluster_matches_the_oracle(
    job: str, kafka_stack: StackConfig, cluster: Cluster, tmp_path: Path
) -> None:
    alerting = ALERTING[job]
    case = alerting.case
    topic = produce(kafka_stack, alerting.records())
    hidden_before = cluster.hidden_count()
    rows = read_topic(kafka_stack, run_job(tmp_path, kafka_stack, case, topic, cluster))
    # the executor's Python workers ran without the checkout on their path
    assert cluster.hidden_count() > hidden_before
    alerts = {r["alert_id"]: r[alerting.field] for r in rows}
    assert len(alerts) == len(rows)  # each alert once
    assert alerts == alerting.oracle()
    assert alerting.planted <= set(alerts.values()), set(alerts.values())
    assert_ran_on_the_cluster(cluster, job)


def test_shipping_on_a_standalone_cluster_matches_the_oracle(
    kafka_stack: StackConfig, cluster: Cluster, tmp_path: Path
) -> None:
    """The job reads the shipping topics themselves, from their end offsets before the run."""
    inputs = list(shipping.SOURCES)
    ensure_topics(kafka_stack, inputs)
    offsets = starting_after(kafka_stack, inputs)
    events = seeded_events(tmp_path / "run", boxes=80, days=3)
    produce_shipping(kafka_stack, keyed_records(events))
    settings = {
        "input_topics": inputs,
        "starting_offsets": offsets,
        "watermark": "30 minutes",
        "trigger": {"mode": "microbatch", "interval": "1 second"},
        "shipping": {"history": "30 days", "settle": "2 seconds"},
    }
    case = Case("shipping", lambda tag: settings, drain=True)
    hidden_before = cluster.hidden_count()
    output = run_job(tmp_path, kafka_stack, case, inputs[0], cluster)
    assert cluster.hidden_count() > hidden_before
    rows = read_topic(kafka_stack, output)
    alerts = {r["alert_id"]: r["rule"] for r in rows}
    assert len(alerts) == len(rows)  # each alert once
    frames = {
        topic: frame_of([e for e in events if TOPIC[e["schema"]][0] == topic], columns)
        for topic, columns in TOPIC_COLUMNS.items()
    }
    assert alerts == {a.alert_id: a.rule for a in run_rules(*frames.values())}
    assert len(set(alerts.values())) >= 3, alerts
    assert any(r["late"] for r in rows)  # voyages re-scored when they land
    assert_ran_on_the_cluster(cluster, "shipping")
