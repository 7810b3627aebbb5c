"""A local 3-node KRaft cluster: `kafka up --brokers 3`, RF 3 topics, and a broker killed with
-9 mid-run while an idempotent acks=all producer keeps going, losing nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource

from core.config import load_stack
from core.config.stack import StackConfig
from core.kafka.admin import admin_client, ensure_topics
from core.kafka.clients import consumer_config, producer_config
from core.kafka.offsets import end_offsets
from streamsim.kafka.broker import LocalBroker, free_node_ports
from tests.conftest import REPO_ROOT

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


def test_cluster_topics_get_three_replicas_and_min_isr_two(
    cluster: tuple[Path, StackConfig],
) -> None:
    path, stack = cluster
    assert cli("kafka", "status", "--brokers", "3", config=path)["running"] is True
    ensure_topics(stack, [TOPIC])
    admin = admin_client(stack)
    metadata = admin.list_topics(timeout=10)
    assert sorted(metadata.brokers) == [1, 2, 3]
    partitions = metadata.topics[TOPIC].partitions.values()
    assert partitions and all(len(p.replicas) == 3 for p in partitions)
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    configs = admin.describe_configs([resource])[resource].result()
    assert configs["min.insync.replicas"].value == "2"


def test_killing_one_broker_loses_nothing(cluster: tuple[Path, StackConfig]) -> None:
    _, stack = cluster
    ensure_topics(stack, [TOPIC])
    before = sum(end_offsets(stack, TOPIC).values())
    three = LocalBroker(stack)
    failures: list[str] = []
    unflushed: list[int] = []
    sent = 0
    stop = threading.Event()

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            failures.append(err.str())

    def produce() -> None:  # the simulator's settings: idempotent, acks=all
        nonlocal sent
        producer = Producer(producer_config(stack, **{"linger.ms": 5}))
        while not stop.is_set():
            for _ in range(200):
                producer.produce(TOPIC, b'{"n":%d}' % sent, key=b"%d" % (sent % 17))
                sent += 1
            producer.poll(0)
            time.sleep(0.02)
        unflushed.append(producer.flush(120))

    producer_thread = threading.Thread(target=produce)
    producer_thread.start()
    try:
        time.sleep(2)
        at_kill = sent
        assert three.kill_node(2) is not None
        assert not three.status().running  # degraded: node 2 is down
        time.sleep(4)
        assert sent > at_kill  # producers kept going while a broker was down
        three.start_node(2)
        assert three.status().running
        time.sleep(1)
    finally:
        stop.set()
        producer_thread.join(180)
    assert not producer_thread.is_alive()
    assert unflushed == [0]
    assert failures == []
    assert sum(end_offsets(stack, TOPIC).values()) - before == sent
    seen = _read_values(stack)
    assert len(seen) == sent and {json.loads(v)["n"] for v in seen} == set(range(sent))


def _read_values(stack: StackConfig) -> list[bytes]:
    ends = end_offsets(stack, TOPIC)
    consumer = Consumer(consumer_config(stack, "cluster-test"))
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in ends])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < sum(ends.values()) and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=0.5):
                if msg.error() is None:
                    values.append(msg.value() or b"")
    finally:
        consumer.close()
    return values
