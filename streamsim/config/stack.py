"""Stack settings: where Kafka and Spark are, which ports the services use, where files go."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator

from streamsim.config.base import Settings

Port = Annotated[int, Field(ge=1, le=65535)]

# Environment variable -> key path it overrides.
ENV_OVERRIDES: dict[str, tuple[str, ...]] = {
    "STREAMSIM_KAFKA_BOOTSTRAP": ("kafka", "bootstrap"),
    "STREAMSIM_KAFKA_PORT": ("kafka", "local", "port"),
    "STREAMSIM_KAFKA_CONTROLLER_PORT": ("kafka", "local", "controller_port"),
    "STREAMSIM_SPARK_MASTER": ("spark", "master"),
    "STREAMSIM_API_PORT": ("api", "port"),
    "STREAMSIM_UI_PORT": ("ui", "port"),
}


class TopicSettings(Settings):
    partitions: int = Field(3, ge=1, le=1024, description="Partitions per topic.")
    # Simulated streams carry simulated CreateTimes, often far in the past, so time-based
    # retention would delete them on arrival: bound topics by size unless told otherwise.
    retention_ms: int = Field(-1, ge=-1, description="retention.ms; -1: no time limit.")
    retention_bytes: int = Field(
        1 << 30, ge=-1, description="retention.bytes per partition; -1: no size limit."
    )


class LocalKafka(Settings):
    """The embedded single-node KRaft broker (`streamsim kafka up`)."""

    host: str = "127.0.0.1"
    port: Port = 9092
    controller_port: Port = 9093
    heap: str = Field("768m", pattern=r"^\d+[mMgG]$", description="JVM -Xmx for the broker.")
    ready_timeout_s: float = Field(60.0, gt=0, description="How long `kafka up` waits.")


class KafkaSettings(Settings):
    bootstrap: str | None = Field(
        None, description="External cluster, host:port[,host:port]. Unset: the local broker."
    )
    local: LocalKafka = LocalKafka()
    topics: TopicSettings = TopicSettings()
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
        return self.bootstrap or f"{self.local.host}:{self.local.port}"

    def topic(self, name: str) -> TopicSettings:
        return self.topic_overrides.get(name, self.topics)


class SparkSettings(Settings):
    master: str = Field("local[*]", description="spark.master: local[*], spark://, yarn, k8s://")
    app_name: str = "streamsim"
    shuffle_partitions: int = Field(4, ge=1, description="spark.sql.shuffle.partitions")
    log_level: Literal["ERROR", "WARN", "INFO", "DEBUG"] = "WARN"
    driver_memory: str = Field("2g", pattern=r"^\d+[mMgG]$")
    conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark conf, verbatim.")


class ServiceSettings(Settings):
    host: str = "127.0.0.1"
    port: Port


class DirSettings(Settings):
    cache: Path = Field(Path(".cache"), description="Downloaded jars and tools (git-ignored).")
    data: Path = Field(Path(".data"), description="Broker logs, run state, outputs.")
    checkpoints: Path = Field(Path(".data/checkpoints"), description="One folder per query.")
    lake: Path = Field(Path(".data/lake"), description="The Parquet lake.")


class StackConfig(Settings):
    """Everything about where things run; every key has a default."""

    kind: Literal["stack"] = "stack"
    kafka: KafkaSettings = KafkaSettings()
    spark: SparkSettings = SparkSettings()
    api: ServiceSettings = ServiceSettings(port=8000)
    ui: ServiceSettings = ServiceSettings(port=8501)
    dirs: DirSettings = DirSettings()
