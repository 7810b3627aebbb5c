"""A local 3-node KRaft cluster: `kafka up --brokers 3`, RF 3 topics, the cluster used as a
user's own ("external") one by `simulate` and `evaluate`, and a broker killed with -9 mid-run
while an idempotent acks=all producer keeps going, losing nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, ConfigResource

from core.config import load_stack
from core.config.stack import StackConfig
from core.kafka.admin import admin_client, ensure_topics
from core.kafka.clients import consumer_config, producer_config
from core.kafka.offsets import end_offsets
from core.kafka.reader import read_topic
from streamsim.kafka.broker import LocalBroker, free_node_ports
from tests.conftest import REPO_ROOT
from tests.integration.test_evaluate_foreign import flat_lines

pytestmark = pytest.mark.integration
TOPIC = "cluster.test"


def cli(*args: str, config: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "streamsim", *args, "--config", str(config), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, StackConfig]]:
    home = tmp_path_factory.mktemp("cluster")
    port, controller = free_node_ports("127.0.0.1", 3)
    path = home / "stack.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "kafka": {"local": {"port": port, "controller_port": controller, "heap": "384m"}},
                "dirs": {"cache": str(REPO_ROOT / ".cache"), "data": str(home)},
            }
        )
    )
    status = cli("kafka", "up", "--brokers", "3", config=path)
    stack = load_stack(path)
    three = LocalBroker(stack, brokers=3)
    try:
        assert status["running"] is True
        assert [n["node"] for n in status["nodes"]] == [1, 2, 3]
        assert len({n["pid"] for n in status["nodes"]}) == 3
        yield path, three.stack
    finally:
        three.down()


def visible_metadata(admin: AdminClient, topic: str) -> ClusterMetadata:
    """Cluster metadata from a broker that knows `topic` (`wait_for` it).

    Each broker learns a new topic from the KRaft metadata log on its own schedule, and
    `list_topics` asks whichever broker the client picks, so one may not know it yet.
    """
    seen: list[ClusterMetadata] = []

    def knows() -> bool:
        seen[:] = [admin.list_topics(timeout=10)]
        return topic in seen[0].topics

    wait_for(knows, f"a broker's metadata names {topic}", timeout_s=60.0)
    return seen[0]


def test_cluster_topics_get_three_replicas_and_min_isr_two(
    cluster: tuple[Path, StackConfig],
) -> None:
    path, stack = cluster
    assert cli("kafka", "status", "--brokers", "3", config=path)["running"] is True
    ensure_topics(stack, [TOPIC])
    admin = admin_client(stack)
    metadata = visible_metadata(admin, TOPIC)
    assert sorted(metadata.brokers) == [1, 2, 3]
    partitions = metadata.topics[TOPIC].partitions.values()
    assert partitions and all(len(p.replicas) == 3 for p in partitions)
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    configs = admin.describe_configs([resource])[resource].result()
    assert configs["min.insync.replicas"].value == "2"


def test_an_external_cluster_is_simulated_into_and_scored(
    cluster: tuple[Path, StackConfig], tmp_path: Path
) -> None:
    """docs/external-kafka.md: a stack file that names only the cluster's bootstrap servers,
    librdkafka client settings and topic defaults; `simulate` writes a seeded sensor fleet to
    it, a job that is not ours writes alerts to it, and `evaluate` scores them from it."""
    _, stack = cluster
    suffix = uuid.uuid4().hex[:8]
    readings_topic, alerts_topic = f"it-external.readings-{suffix}", f"it-external.alerts-{suffix}"
    theirs = tmp_path / "their-stack.yaml"
    theirs.write_text(
        yaml.safe_dump(
            {
                "kafka": {
                    "bootstrap": stack.kafka.bootstrap_servers,
                    "client": {"security.protocol": "PLAINTEXT", "client.id": "their-stack"},
                    "topics": {"partitions": 4, "replication_factor": 3},
                },
                "dirs": {"data": str(tmp_path / "data")},
            }
        )
    )
    external = load_stack(theirs)
    assert external.kafka.external and len(external.kafka.bootstrap_servers.split(",")) == 3
    data = yaml.safe_load((REPO_ROOT / "config" / "scenarios" / "sensors.yaml").read_text())
    data.update(seed=5, run_id=f"it-{suffix}", entities=200, duration_s=600)
    data["domain"]["topic"] = readings_topic
    data["domain"]["faults"]["rate_per_hour"] = 0.5  # 10x the default: dozens of incidents
    scenario = tmp_path / "sensors.yaml"
    scenario.write_text(yaml.safe_dump(data))
    prefix = cli("simulate", str(scenario), "--speed", "max", config=theirs)["id_prefix"]

    metadata = visible_metadata(admin_client(external), readings_topic)
    partitions = metadata.topics[readings_topic].partitions.values()
    assert len(partitions) == 4 and all(len(p.replicas) == 3 for p in partitions)
    readings = [r for r in read_topic(external, readings_topic) if "sensor_id" in r]
    assert readings and all(r["event_id"].startswith(prefix) for r in readings)
    alerts = flat_lines(readings)
    assert len(alerts) >= 5
    ensure_topics(external, [alerts_topic])
    producer = Producer(producer_config(external))
    for a in alerts:
        producer.produce(alerts_topic, json.dumps(a).encode(), key=a["entity_id"])
    assert producer.flush(30) == 0

    report = cli("evaluate", "sensors", "--alerts-topic", alerts_topic, config=theirs)
    assert report["run"]["id_prefix"] == prefix
    assert report["foreign"]["read"] == report["foreign"]["scored"] == len(alerts)
    stuck = report["paths"]["foreign"]["stuck_sensor"]
    assert stuck["support"] >= 5, stuck
    # truth read from the same cluster: alerts matched to the wrong run's events score ~0
    assert stuck["precision"] >= 0.9 and stuck["recall"] >= 0.6, stuck


def test_killing_one_broker_loses_nothing(cluster: tuple[Path, StackConfig]) -> None:
    _, stack = cluster
    ensure_topics(stack, [TOPIC])
    before = end_offsets(stack, TOPIC)
    three = LocalBroker(stack)
    writer = Writer(stack)
    writer.thread.start()
    try:
        wait_for(lambda: writer.highest_acked >= 2_000, "the first 2,000 records acknowledged")
        assert three.kill_node(2) is not None
        wait_for(lambda: not three.status().running, "node 2 seen down")  # degraded
        at_kill = writer.sent  # every record from this one on is sent with node 2 dead
        # The producer keeps going: a record sent after the kill is acknowledged (acks=all by
        # the two nodes left, min.insync.replicas 2) while node 2 is still down.
        wait_for(lambda: writer.highest_acked >= at_kill, "a write acknowledged by two of three")
        assert not three.status().running
        three.start_node(2)
        assert three.status().running
        at_restart = writer.sent
        wait_for(lambda: writer.highest_acked >= at_restart, "a write acknowledged after restart")
    finally:
        writer.stop.set()
        writer.thread.join(180)
    assert not writer.thread.is_alive()
    assert writer.unflushed == 0
    assert writer.failures == []
    sent = writer.sent
    assert sum(end_offsets(stack, TOPIC).values()) - sum(before.values()) == sent
    seen = _read_values(stack, before)
    assert len(seen) == sent and {json.loads(v)["n"] for v in seen} == set(range(sent))


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 120.0) -> None:
    """Poll `condition` until it holds; fail naming `what` once `timeout_s` has passed."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f}s: {what}"
        time.sleep(0.1)


class Writer:
    """Writes records numbered from 0 to TOPIC on a thread, with the simulator's settings
    (idempotent, acks=all), until `stop`; counts what it sent and what was acknowledged."""

    def __init__(self, stack: StackConfig) -> None:
        self.stack = stack
        self.sent = 0
        self.highest_acked = -1  # the number of the latest record acknowledged
        self.failures: list[str] = []
        self.unflushed: int | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="writer")

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failures.append(err.str())
        else:
            n = int(json.loads(msg.value() or b"{}")["n"])
            self.highest_acked = max(self.highest_acked, n)

    def _run(self) -> None:
        producer = Producer(producer_config(self.stack, **{"linger.ms": 5}))
        while not self.stop.is_set():
            for _ in range(200):
                value, key = b'{"n":%d}' % self.sent, b"%d" % (self.sent % 17)
                try:
                    producer.produce(TOPIC, value, key=key, on_delivery=self._delivered)
                except BufferError:  # the queue is full while a broker is down: wait for room
                    break
                self.sent += 1
            producer.poll(0)
            time.sleep(0.02)
        self.unflushed = producer.flush(120)


def _read_values(stack: StackConfig, since: dict[int, int]) -> list[bytes]:
    """Every value written to TOPIC after the offsets `since`."""
    ends = end_offsets(stack, TOPIC)
    consumer = Consumer(consumer_config(stack, "cluster-test"))
    consumer.assign([TopicPartition(TOPIC, p, since.get(p, 0)) for p in ends])
    values: list[bytes] = []
    expected = sum(ends.values()) - sum(since.values())
    deadline = time.monotonic() + 120
    try:
        while len(values) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=0.5):
                if msg.error() is None:
                    values.append(msg.value() or b"")
    finally:
        consumer.close()
    return values
