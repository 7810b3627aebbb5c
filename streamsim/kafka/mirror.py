"""Kafka's MirrorMaker 2 from the port cluster (`kafka up --cluster port`) to the main cluster
(headquarters), run with its dedicated driver `org.apache.kafka.connect.mirror.MirrorMaker` on the
broker's jars plus `connect-mirror` (`make setup` resolves both from Maven Central).

Replication lag is measured per topic-partition from the clusters themselves: the port's end
offset minus HQ's end offset of the copy. MM2 copies partition p to partition p and, with the
default `prefix` policy, into an HQ topic only it writes (`port.shipping.port-events`), so the two
end offsets are equal exactly when every record has arrived.

Example:
    >>> mirror = MirrorMaker(load_stack(None))
    >>> mirror.up()                     # both clusters must answer; creates the port's topics
    >>> mirror.wait_caught_up(60).lag   # 0 once HQ has every record
    0
    >>> mirror.down()
"""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition

from core.config import StackConfig
from core.jvm import JAVA_HINT, java_executable, mirror_classpath
from core.kafka.admin import ensure_topics, is_reachable
from core.kafka.clients import consumer_config
from runs.process import kill_group
from streamsim.kafka.broker import (
    BrokerError,
    log_tail,
    port_stack,
    running_java_pid,
    spawn_daemon,
    stop_daemon,
)

MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
#: Logged by the replication task's worker once it consumes from the port (connect-runtime 4.3).
READY_LINE = "{id=MirrorSourceConnector-0} Source task finished initialization and start"
POLICIES = {
    "prefix": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
    "identity": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
}


@dataclass(frozen=True)
class PartitionLag:
    """One replicated partition: the port's end offset, HQ's, and the records still to copy."""

    topic: str
    partition: int
    target_topic: str
    source_end: int
    target_end: int

    @property
    def lag(self) -> int:
        return max(self.source_end - self.target_end, 0)


@dataclass(frozen=True)
class MirrorStatus:
    running: bool
    pid: int | None
    log: str
    source: str
    target: str
    policy: str
    partitions: tuple[PartitionLag, ...] = ()
    error: str | None = None
    measured_at: float = field(default_factory=time.time)

    @property
    def lag(self) -> int:
        """Records on the port not yet on HQ, over every replicated partition."""
        return sum(p.lag for p in self.partitions)

    @property
    def caught_up(self) -> bool:
        return self.error is None and bool(self.partitions) and self.lag == 0

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["partitions"] = [{**asdict(p), "lag": p.lag} for p in self.partitions]
        data.update(lag=self.lag, caught_up=self.caught_up)
        return data


class MirrorError(BrokerError):
    """MirrorMaker could not be started, stopped or measured; the message says what to do."""


class MirrorMaker:
    """One MM2 process replicating `kafka.mirror.topics` from the port cluster to the main one;
    its mm2.properties, log and pid live in `<data>/kafka/mirror/`."""

    def __init__(self, stack: StackConfig) -> None:
        self.stack = stack
        self.settings = stack.kafka.mirror
        self.source = port_stack(stack)
        self.home = stack.dirs.data / "kafka" / "mirror"
        self.log_path = self.home / "mirror.log"
        self.pid_path = self.home / "mirror.pid"

    def target_topic(self, topic: str) -> str:
        """HQ's name for a port topic under the configured replication policy."""
        if self.settings.replication_policy == "identity":
            return topic
        return f"{self.settings.source_alias}.{topic}"

    def properties(self) -> dict[str, str]:
        """mm2.properties: one flow, port -> HQ, of exactly the configured topics."""
        src, dst = self.settings.source_alias, self.settings.target_alias
        kafka = self.stack.kafka
        # HQ's internal and copied topics: as many replicas as streamsim gives its own topics.
        hq_rf = kafka.topics.replication_factor or (3 if kafka.external else kafka.local.brokers)
        port_rf = kafka.port_cluster.brokers
        refresh = str(self.settings.refresh_s)
        return {
            "clusters": f"{src},{dst}",
            f"{src}.bootstrap.servers": self.source.kafka.bootstrap_servers,
            f"{dst}.bootstrap.servers": kafka.bootstrap_servers,
            f"{src}->{dst}.enabled": "true",
            f"{dst}->{src}.enabled": "false",
            f"{src}->{dst}.topics": ",".join(_exact(t) for t in self.settings.topics),
            "replication.policy.class": POLICIES[self.settings.replication_policy],
            "tasks.max": "1",
            # MM2's plugins declare themselves in ServiceLoader manifests: skip the classpath
            # scan of the default `hybrid_warn` (24 s of a 48 s start here), for the driver and
            # for the Connect worker of the flow into HQ, which reads the target's settings.
            "plugin.discovery": "service_load",
            f"{dst}.plugin.discovery": "service_load",
            "refresh.topics.interval.seconds": refresh,
            "refresh.groups.interval.seconds": refresh,
            "sync.topic.acls.enabled": "false",  # the local clusters run no authorizer
            "emit.checkpoints.interval.seconds": refresh,
            "offset.flush.interval.ms": "1000",
            "replication.factor": str(hq_rf),
            "checkpoints.topic.replication.factor": str(hq_rf),
            "heartbeats.topic.replication.factor": str(hq_rf),
            "offset-syncs.topic.replication.factor": str(port_rf),
            "config.storage.replication.factor": str(hq_rf),
            "offset.storage.replication.factor": str(hq_rf),
            "status.storage.replication.factor": str(hq_rf),
        }

    def write_config(self) -> Path:
        self.home.mkdir(parents=True, exist_ok=True)
        path = self.home / "mm2.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        (self.home / "log4j2.properties").write_text(_LOG4J2)
        return path

    def running_pid(self) -> int | None:
        return running_java_pid(self.pid_path, MAIN_CLASS)

    def up(self) -> MirrorStatus:
        """Start MM2 unless it runs; return once its replication task consumes from the port."""
        if self.running_pid() is not None:
            return self.status()
        if not is_reachable(self.source):
            raise MirrorError(
                f"the port cluster does not answer at {self.source.kafka.bootstrap_servers}: "
                "start it with `streamsim kafka up --cluster port`"
            )
        if not is_reachable(self.stack):
            raise MirrorError(
                f"the main cluster does not answer at {self.stack.kafka.bootstrap_servers}: "
                "start it with `streamsim kafka up`"
            )
        java = java_executable()
        if java is None:
            raise MirrorError(f"no Java found (JAVA_HOME, else PATH): {JAVA_HINT}")
        classpath = mirror_classpath(self.stack)
        # On the port first, so the flow has its topics from the start instead of a refresh later.
        ensure_topics(self.source, self.settings.topics)
        properties = self.write_config()
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        process = self._start(java, classpath, properties)
        self._wait_ready(process, offset)
        return self.status()

    def down(self, timeout_s: float = 30.0) -> bool:
        """Stop the MM2 process `up` started; False if none ran."""
        return stop_daemon(self.running_pid(), self.pid_path, timeout_s)

    def status(self) -> MirrorStatus:
        """Whether MM2 runs, and the lag of every replicated partition."""
        pid = self.running_pid()
        base = dict(
            running=pid is not None,
            pid=pid,
            log=str(self.log_path.resolve()),
            source=self.source.kafka.bootstrap_servers,
            target=self.stack.kafka.bootstrap_servers,
            policy=self.settings.replication_policy,
        )
        try:
            partitions = self.lag()
        except (KafkaException, MirrorError) as exc:
            return MirrorStatus(**base, error=str(exc))  # type: ignore[arg-type]
        return MirrorStatus(**base, partitions=partitions)  # type: ignore[arg-type]

    def lag(self) -> tuple[PartitionLag, ...]:
        """Per port partition: its end offset against the end offset of HQ's copy (0 while the
        copy does not exist yet)."""
        topics = self.settings.topics
        source = _end_offsets(self.source, topics)
        if not source:
            raise MirrorError(
                f"none of {', '.join(topics)} exists on the port cluster at "
                f"{self.source.kafka.bootstrap_servers}"
            )
        target = _end_offsets(self.stack, [self.target_topic(t) for t in topics])
        return tuple(
            PartitionLag(
                topic,
                partition,
                self.target_topic(topic),
                end,
                target.get((self.target_topic(topic), partition), 0),
            )
            for (topic, partition), end in sorted(source.items())
        )

    def wait_caught_up(self, timeout_s: float, poll_s: float = 0.25) -> MirrorStatus:
        """Poll the lag until HQ holds every record the port held at that moment."""
        deadline = time.monotonic() + timeout_s
        while True:
            status = self.status()
            if status.caught_up or time.monotonic() > deadline:
                return status
            if not status.running:
                raise MirrorError(
                    f"MirrorMaker is not running; last lines of {self.log_path}:\n"
                    f"{log_tail(self.log_path)}"
                )
            time.sleep(poll_s)

    def _start(self, java: str, classpath: str, properties: Path) -> subprocess.Popen[bytes]:
        heap = self.settings.heap
        command = [
            java,
            f"-Xmx{heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={(self.home / 'log4j2.properties').resolve()}",
            "-cp",
            classpath,
            MAIN_CLASS,
            str(properties.resolve()),
            "--clusters",
            self.settings.target_alias,  # this process drives the flows into HQ only
        ]
        return spawn_daemon(command, self.log_path, self.pid_path)

    def _wait_ready(self, process: subprocess.Popen[bytes], offset: int) -> None:
        deadline = time.monotonic() + self.settings.ready_timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self.pid_path.unlink(missing_ok=True)
                raise MirrorError(
                    f"MirrorMaker exited with status {process.returncode} while starting; "
                    f"last lines of {self.log_path}:\n{log_tail(self.log_path)}"
                )
            if READY_LINE.encode() in _read_from(self.log_path, offset):
                return
            time.sleep(0.3)
        kill_group(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        self.pid_path.unlink(missing_ok=True)
        raise MirrorError(
            f"MirrorMaker's replication task did not start within "
            f"{self.settings.ready_timeout_s:.0f}s and was stopped; see {self.log_path}:\n"
            f"{log_tail(self.log_path)}"
        )


def _exact(topic: str) -> str:
    """MM2's `topics` entries are regexes; a topic name as one matching only itself."""
    return topic.replace(".", r"\.")


def _end_offsets(stack: StackConfig, topics: list[str]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> high watermark, for those of `topics` that exist."""
    group = f"streamsim-mirror-lag-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(consumer_config(stack, group, log_level=0))
    try:
        metadata = consumer.list_topics(timeout=10).topics
        return {
            (topic, p): consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for topic in topics
            if topic in metadata and metadata[topic].error is None
            for p in metadata[topic].partitions
        }
    finally:
        consumer.close()


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read()
    except OSError:
        return b""


_LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
logger.mirror.name = org.apache.kafka.connect.mirror
logger.mirror.level = INFO
logger.task.name = org.apache.kafka.connect.runtime.AbstractWorkerSourceTask
logger.task.level = INFO
logger.scheduler.name = org.apache.kafka.connect.mirror.Scheduler
logger.scheduler.level = WARN
"""
