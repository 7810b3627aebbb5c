"""Port-to-headquarters replication with Kafka's MirrorMaker 2, against real brokers: a port
cluster on free ports beside the session broker (HQ), MM2 between them, a batch of port events
into the port, and every one found on HQ, byte for byte, with the lag the CLI reports."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import yaml
from confluent_kafka import Producer

from core.config import StackConfig
from core.config.loader import load_stack
from core.contracts.events import SHIPPING_PORT_EVENT
from core.kafka.admin import admin_client, delete_topics
from core.kafka.clients import producer_config
from scenarios.shipping.topics import PORT_EVENTS
from streamsim.kafka.broker import LocalBroker, free_node_ports, port_stack
from streamsim.kafka.mirror import MirrorMaker
from streamsim.verify.readers import consume_topic
from tests.conftest import REPO_ROOT, STREAMSIM

pytestmark = pytest.mark.integration


@pytest.fixture
def stack_file(kafka_stack: StackConfig, tmp_path: Path) -> Path:
    """A stack file: HQ is the session broker, the port cluster is on free ports with its data
    (and MM2's) in tmp_path, and HQ's copies are `port-<tag>.<topic>`, this test's own."""
    port, controller = free_node_ports(kafka_stack.kafka.local.host, 1)
    data = kafka_stack.model_dump(mode="json")
    data["kafka"]["port_cluster"] = {"port": port, "controller_port": controller}
    data["kafka"]["mirror"] = {"source_alias": f"port-{uuid.uuid4().hex[:8]}", "refresh_s": 2}
    data["dirs"]["data"] = str(tmp_path / "data")
    path = tmp_path / "stack.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def mirrored(stack_file: Path) -> Iterator[MirrorMaker]:
    """The port cluster and MM2 running; both stopped, and HQ's copies deleted, afterwards."""
    stack = load_stack(stack_file)
    port = LocalBroker(stack, cluster="port")
    mirror = MirrorMaker(stack)
    try:
        port.up()
        mirror.up()
        yield mirror
    finally:
        mirror.down()
        port.down()
        alias = stack.kafka.mirror.source_alias
        ours = [
            t
            for t in admin_client(stack).list_topics(timeout=10).topics
            if t.startswith(f"{alias}.") or t.endswith(f".{alias}.internal")
        ]
        delete_topics(stack, ours)
    assert mirror.running_pid() is None and not port.status().running


def port_events(run: str, count: int) -> list[dict[str, object]]:
    """`count` port events of the `shipping.port-event` contract, calls at five ports."""
    ports = ("SGSIN", "NLRTM", "CNSHA", "USLAX", "DEHAM")
    kinds = ("arrival", "loaded", "unloaded", "departure")
    model = SHIPPING_PORT_EVENT.model()
    events = []
    for i in range(count):
        kind = kinds[i % 4]
        cargo = kind in ("loaded", "unloaded")
        event = {
            "schema": SHIPPING_PORT_EVENT.id,
            "event_id": f"it-{run}-{i:05d}",
            "port": ports[i % len(ports)],
            "event_time": 1_772_454_116_021 + i * 60_000,
            "seq": i,
            "event": kind,
            "ship_id": f"IMO98{i % 7:05d}",
            "voyage_id": 100_001 + i // 20,
            "container_id": f"MSCU{i:07d}" if cargo else None,
            "owner": "owner-a" if cargo else None,
            "cargo": "reefer" if cargo else None,
        }
        model.model_validate(event)
        events.append(event)
    return events


def test_every_port_event_reaches_hq(mirrored: MirrorMaker, stack_file: Path) -> None:
    hq = mirrored.stack
    port = port_stack(hq)
    run = uuid.uuid4().hex[:8]
    sent = port_events(run, 600)
    producer = Producer(producer_config(port))
    for event in sent:
        producer.produce(PORT_EVENTS, key=str(event["port"]), value=orjson.dumps(event))
    assert producer.flush(30) == 0
    produced = time.monotonic()
    first = mirrored.status()  # what HQ already had the moment the port acknowledged the batch

    status = mirrored.wait_caught_up(timeout_s=120)  # a deadline for a loaded machine
    caught_up_s = time.monotonic() - produced
    assert status.running and status.caught_up, status.to_dict()

    on_hq = consume_topic(hq, mirrored.target_topic(PORT_EVENTS))
    assert sorted(orjson.loads(v)["event_id"] for v in on_hq.values) == [
        e["event_id"] for e in sent
    ]
    assert Counter(zip(on_hq.keys, on_hq.values, strict=True)) == Counter(
        (str(e["port"]), orjson.dumps(e)) for e in sent
    )

    # The CLI reports the lag per topic-partition: 0 everywhere, from the same end offsets.
    result = subprocess.run(
        [STREAMSIM, "kafka", "mirror", "status", "--config", str(stack_file), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = orjson.loads(result.stdout.strip().splitlines()[-1])
    assert report["running"] and report["caught_up"] and report["lag"] == 0
    rows = {(r["topic"], r["partition"]): r for r in report["partitions"]}
    assert set(rows) == {(t, p) for t in hq.kafka.mirror.topics for p in range(3)}
    assert sum(r["source_end"] for (t, _), r in rows.items() if t == PORT_EVENTS) == len(sent)
    assert all(r["target_end"] == r["source_end"] and r["lag"] == 0 for r in rows.values())
    print(
        f"\nmirrored {len(sent)} port events port -> HQ: lag {first.lag} when the port had "
        f"acknowledged them all, 0 after {caught_up_s:.2f}s"
    )
