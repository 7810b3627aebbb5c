"""MirrorMaker 2's generated settings, the port cluster's config and the lag arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from core.config import StackConfig
from core.jvm import mirror_classpath
from streamsim.doctor import check_kafka_jars
from streamsim.kafka.broker import BrokerError, LocalBroker, port_stack
from streamsim.kafka.mirror import MirrorMaker, MirrorStatus, PartitionLag


def stack(tmp_path: Path, **kafka: object) -> StackConfig:
    return StackConfig.model_validate({"kafka": kafka, "dirs": {"data": str(tmp_path)}})


def test_port_cluster_defaults_apart_from_main_even_when_partly_set(tmp_path: Path) -> None:
    s = stack(tmp_path, port_cluster={"heap": "256m"})
    assert (s.kafka.port_cluster.port, s.kafka.port_cluster.controller_port) == (9094, 9095)
    port = port_stack(stack(tmp_path, bootstrap="hq:9092"))
    assert port.kafka.bootstrap_servers == "127.0.0.1:9094" and not port.kafka.external


def test_port_broker_has_its_own_home_and_ports(tmp_path: Path) -> None:
    main, port = LocalBroker(stack(tmp_path)), LocalBroker(stack(tmp_path), cluster="port")
    assert port.home == tmp_path / "kafka" / "port" and main.home == tmp_path / "kafka"
    assert port.bootstrap == "127.0.0.1:9094" and main.bootstrap == "127.0.0.1:9092"
    with pytest.raises(BrokerError, match="unknown cluster"):
        LocalBroker(stack(tmp_path), cluster="ship")  # type: ignore[arg-type]


def test_mm2_properties_one_flow_of_exact_topics(tmp_path: Path) -> None:
    props = MirrorMaker(stack(tmp_path, local={"brokers": 3})).properties()
    assert props["clusters"] == "port,hq"
    assert props["port.bootstrap.servers"] == "127.0.0.1:9094"
    assert props["hq.bootstrap.servers"] == "127.0.0.1:9092,127.0.0.1:9192,127.0.0.1:9292"
    assert (props["port->hq.enabled"], props["hq->port.enabled"]) == ("true", "false")
    assert props["port->hq.topics"] == (
        r"shipping\.positions,shipping\.containers,shipping\.port-events,truth\.shipping"
    )
    assert props["replication.policy.class"].endswith(".DefaultReplicationPolicy")
    assert props["replication.factor"] == props["status.storage.replication.factor"] == "3"
    assert props["offset-syncs.topic.replication.factor"] == "1"  # on the 1-node port cluster


def test_target_topic_follows_the_policy(tmp_path: Path) -> None:
    prefix = MirrorMaker(stack(tmp_path, mirror={"source_alias": "rtm"}))
    assert prefix.target_topic("shipping.port-events") == "rtm.shipping.port-events"
    identity = MirrorMaker(stack(tmp_path, mirror={"replication_policy": "identity"}))
    assert identity.target_topic("shipping.port-events") == "shipping.port-events"
    assert identity.properties()["replication.policy.class"].endswith(".IdentityReplicationPolicy")


def test_mirror_settings_reject_bad_names(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="not Kafka topic names"):
        stack(tmp_path, mirror={"topics": ["shipping.*"]})
    with pytest.raises(ValidationError):
        stack(tmp_path, mirror={"source_alias": "port.a"})


def test_lag_per_partition_and_caught_up() -> None:
    parts = (
        PartitionLag("shipping.port-events", 0, "port.shipping.port-events", 10, 7),
        PartitionLag("shipping.port-events", 1, "port.shipping.port-events", 5, 5),
    )
    status = MirrorStatus(True, 1, "log", "a:1", "b:2", "prefix", parts)
    assert [p.lag for p in parts] == [3, 0] and status.lag == 3 and not status.caught_up
    data = status.to_dict()
    assert data["lag"] == 3 and data["partitions"][0]["lag"] == 3  # type: ignore[index]
    done = MirrorStatus(True, 1, "log", "a:1", "b:2", "prefix", parts[1:])
    assert done.caught_up
    assert not MirrorStatus(True, 1, "log", "a:1", "b:2", "prefix", (), "down").caught_up


def test_doctor_names_missing_mirror_jars(tmp_path: Path) -> None:
    s = StackConfig.model_validate({"dirs": {"cache": str(tmp_path)}})
    (tmp_path / "jars" / "kafka").mkdir(parents=True)
    (tmp_path / "jars" / "kafka" / "kafka_2.13-4.3.1.jar").touch()
    missing = check_kafka_jars(s)
    assert not missing.ok and "MirrorMaker 2" in missing.detail and "make setup" in missing.fix
    (tmp_path / "jars" / "kafka-mirror").mkdir()
    (tmp_path / "jars" / "kafka-mirror" / "connect-mirror-4.3.1.jar").touch()
    assert check_kafka_jars(s).ok
    assert mirror_classpath(s).endswith("kafka-mirror/*")
