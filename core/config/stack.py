"""Stack settings: where Kafka and Spark are, which ports the services use, where files go."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from core.config.base import Settings
from core.contracts.topics import (
    SHIPPING_CONTAINERS,
    SHIPPING_PORT_EVENTS,
    SHIPPING_POSITIONS,
    truth,
)

Port = Annotated[int, Field(ge=1, le=65535)]

# Environment variable -> key path it overrides.
ENV_OVERRIDES: dict[str, tuple[str, ...]] = {
    "STREAMSIM_KAFKA_BOOTSTRAP": ("kafka", "bootstrap"),
    "STREAMSIM_KAFKA_PORT": ("kafka", "local", "port"),
    "STREAMSIM_KAFKA_CONTROLLER_PORT": ("kafka", "local", "controller_port"),
    "STREAMSIM_KAFKA_BROKERS": ("kafka", "local", "brokers"),
    "STREAMSIM_PORT_KAFKA_PORT": ("kafka", "port_cluster", "port"),
    "STREAMSIM_PORT_KAFKA_CONTROLLER_PORT": ("kafka", "port_cluster", "controller_port"),
    "STREAMSIM_SPARK_MASTER": ("spark", "master"),
    "STREAMSIM_API_PORT": ("api", "port"),
    "STREAMSIM_UI_PORT": ("ui", "port"),
}
#: Environment variable: a JSON object of librdkafka settings merged over `kafka.client`, so
#: secrets (`sasl.password`, ...) need not be written into a stack file.
KAFKA_CLIENT_ENV = "STREAMSIM_KAFKA_CLIENT"
#: librdkafka settings that hold a secret: passwords, client secrets, JAAS and OAuth configs,
#: private keys in PEM.
_SECRET_CLIENT_KEY = re.compile(r"password|secret|jaas|key\.pem|oauthbearer\.config", re.I)


def is_secret_client_key(key: str) -> bool:
    """Whether a librdkafka setting holds a secret.

    >>> is_secret_client_key("sasl.password"), is_secret_client_key("security.protocol")
    (True, False)
    """
    return bool(_SECRET_CLIENT_KEY.search(key))


class TopicSettings(Settings):
    partitions: int = Field(3, ge=1, le=1024, description="Partitions per topic.")
    # Simulated streams carry simulated CreateTimes, often far in the past, so time-based
    # retention would delete them on arrival: bound topics by size unless told otherwise.
    retention_ms: int = Field(-1, ge=-1, description="retention.ms; -1: no time limit.")
    retention_bytes: int = Field(
        1 << 30, ge=-1, description="retention.bytes per partition; -1: no size limit."
    )
    replication_factor: int | None = Field(
        None,
        ge=1,
        description="Replicas per partition; unset: the cluster's default.replication.factor "
        "(3 on `kafka up --brokers 3`, else 1).",
    )
    min_insync_replicas: int | None = Field(
        None,
        ge=1,
        description="min.insync.replicas per topic; unset: the cluster's (2 with 3 brokers).",
    )


#: Node i (0-based) of a local cluster listens on `port + NODE_PORT_STEP * i` and
#: `controller_port + NODE_PORT_STEP * i`.
NODE_PORT_STEP = 100


class LocalKafka(Settings):
    """The embedded KRaft broker (`streamsim kafka up`): one node, or a 3-node cluster."""

    host: str = Field("127.0.0.1", description="Listener address of the local broker.")
    port: Port = Field(9092, description="Client (PLAINTEXT) port (node 2: +100, node 3: +200).")
    controller_port: Port = Field(
        9093, description="KRaft controller port (node 2: +100, node 3: +200)."
    )
    brokers: int = Field(
        1,
        description="1: a single broker; 3: combined broker+controller nodes, replication "
        "factor 3 and min.insync.replicas=2 (`kafka up --brokers 3`).",
    )
    heap: str = Field("768m", pattern=r"^\d+[mMgG]$", description="JVM -Xmx for the broker.")
    ready_timeout_s: float = Field(60.0, gt=0, description="How long `kafka up` waits.")

    @field_validator("brokers")
    @classmethod
    def _one_or_three(cls, value: int) -> int:
        if value not in (1, 3):
            raise ValueError("1 (a single broker) or 3 (a cluster with a 3-voter quorum)")
        return value


class PortKafka(LocalKafka):
    """The port's own local KRaft cluster (`streamsim kafka up --cluster port`), beside the main
    one: its own ports, data, pid and log."""

    port: Port = Field(9094, description="Client (PLAINTEXT) port (node 2: +100, node 3: +200).")
    controller_port: Port = Field(
        9095, description="KRaft controller port (node 2: +100, node 3: +200)."
    )
    heap: str = Field("512m", pattern=r"^\d+[mMgG]$", description="JVM -Xmx per node.")


#: The topics a port's cluster replicates to headquarters by default: its shipping streams and
#: their truth, so HQ can score what it receives.
PORT_TOPICS = (
    SHIPPING_POSITIONS.name,
    SHIPPING_CONTAINERS.name,
    SHIPPING_PORT_EVENTS.name,
    truth("shipping").name,
)
_ALIAS = r"^[A-Za-z0-9_-]{1,40}$"


class MirrorSettings(Settings):
    """MirrorMaker 2 (`streamsim kafka mirror`): the port cluster's topics, copied to the main
    (headquarters) cluster."""

    topics: list[str] = Field(
        list(PORT_TOPICS),
        min_length=1,
        description="Port-cluster topics to replicate (exact names).",
    )
    source_alias: str = Field(
        "port",
        pattern=_ALIAS,
        description="MM2 alias of the port cluster: HQ names its copies `<alias>.<topic>`.",
    )
    target_alias: str = Field("hq", pattern=_ALIAS, description="MM2 alias of the main cluster.")
    replication_policy: Literal["prefix", "identity"] = Field(
        "prefix",
        description="prefix: HQ topic `port.shipping.port-events` (MM2's default policy); "
        "identity: the same name on HQ (IdentityReplicationPolicy).",
    )
    refresh_s: int = Field(
        5, ge=1, description="How often MM2 looks for new topics and partitions on the port."
    )
    heap: str = Field("384m", pattern=r"^\d+[mMgG]$", description="JVM -Xmx for MirrorMaker.")
    ready_timeout_s: float = Field(
        90.0, gt=0, description="How long `kafka mirror up` waits for MM2 to start."
    )

    @field_validator("topics")
    @classmethod
    def _plain_names(cls, value: list[str]) -> list[str]:
        bad = [t for t in value if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", t)]
        if bad:
            raise ValueError(f"not Kafka topic names: {bad}")
        return value


class KafkaSettings(Settings):
    bootstrap: str | None = Field(
        None, description="External cluster, host:port[,host:port]. Unset: the local broker."
    )
    local: LocalKafka = Field(
        LocalKafka(), description="The embedded broker, when no bootstrap is set."
    )
    port_cluster: PortKafka = Field(
        PortKafka(),
        description="A second local KRaft cluster standing for a port's own cluster "
        "(`kafka up --cluster port`); always local, whatever `bootstrap` says.",
    )
    mirror: MirrorSettings = Field(
        MirrorSettings(), description="MirrorMaker 2 from the port cluster to the main one."
    )
    topics: TopicSettings = Field(
        TopicSettings(), description="Defaults for topics streamsim creates."
    )
    topic_overrides: dict[str, TopicSettings] = Field(
        default_factory=dict, description="Per-topic partitions and retention."
    )
    client: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Extra librdkafka settings (e.g. security.protocol)."
    )

    @field_validator("bootstrap")
    @classmethod
    def _bootstrap_has_ports(cls, value: str | None) -> str | None:
        if value is None:
            return None
        for server in value.split(","):
            host, _, port = server.strip().rpartition(":")
            if not host or not port.isdigit():
                raise ValueError("expected host:port[,host:port...], e.g. broker1:9092")
        return value

    @property
    def external(self) -> bool:
        return self.bootstrap is not None

    @property
    def bootstrap_servers(self) -> str:
        if self.bootstrap:
            return self.bootstrap
        local = self.local
        return ",".join(
            f"{local.host}:{local.port + NODE_PORT_STEP * i}" for i in range(local.brokers)
        )

    def topic(self, name: str) -> TopicSettings:
        return self.topic_overrides.get(name, self.topics)


class SparkSettings(Settings):
    master: str = Field("local[*]", description="spark.master: local[*], spark://, yarn, k8s://")
    app_name: str = Field("streamsim", description="Prefix of each job's spark.app.name.")
    shuffle_partitions: int | None = Field(
        None,
        ge=1,
        description="spark.sql.shuffle.partitions; unset: the cores of a local master (each "
        "stateful partition costs a state store and a task per batch), else 4.",
    )
    log_level: Literal["ERROR", "WARN", "INFO", "DEBUG"] = Field(
        "WARN", description="Spark driver log level."
    )
    driver_memory: str = Field("2g", pattern=r"^\d+[mMgG]$", description="spark.driver.memory")
    conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark conf, verbatim.")

    def partitions(self) -> int:
        """`shuffle_partitions`, or its default for `master`.

        >>> SparkSettings(master="local[2]").partitions()
        2
        >>> SparkSettings(master="spark://host:7077").partitions()
        4
        """
        if self.shuffle_partitions is not None:
            return self.shuffle_partitions
        local = re.fullmatch(r"local\[(\d+|\*)(?:,\s*\d+)?\]|local", self.master)
        if local is None:
            return 4
        cores = local.group(1)
        if cores is None:
            return 1  # "local": one thread
        return (os.cpu_count() or 1) if cores == "*" else int(cores)


class ServiceSettings(Settings):
    host: str = Field("127.0.0.1", description="Listen address.")
    port: Port = Field(description="Listen port.")


class DirSettings(Settings):
    cache: Path = Field(Path(".cache"), description="Downloaded jars and tools (git-ignored).")
    data: Path = Field(Path(".data"), description="Broker logs, run state, outputs.")
    checkpoints: Path = Field(Path(".data/checkpoints"), description="One folder per query.")
    lake: Path = Field(Path(".data/lake"), description="The Parquet lake.")


class StackConfig(Settings):
    """Everything about where things run; every key has a default."""

    kind: Literal["stack"] = Field("stack", description="Marks a stack file.")
    kafka: KafkaSettings = Field(KafkaSettings(), description="The Kafka cluster.")
    spark: SparkSettings = Field(SparkSettings(), description="Where Spark jobs run.")
    api: ServiceSettings = Field(ServiceSettings(port=8000), description="The HTTP service.")
    ui: ServiceSettings = Field(ServiceSettings(port=8501), description="The control panel.")
    dirs: DirSettings = Field(DirSettings(), description="Where files go.")


def split_client_secrets(stack: StackConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """The stack as plain data without the secret `kafka.client` settings, and those settings
    (for `KAFKA_CLIENT_ENV`, which `load_stack` merges back)."""
    data = stack.model_dump(mode="json")
    client = data["kafka"]["client"]
    secrets = {k: v for k, v in client.items() if is_secret_client_key(k)}
    data["kafka"]["client"] = {k: v for k, v in client.items() if k not in secrets}
    return data, secrets
