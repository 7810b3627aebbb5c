"""The embedded Apache Kafka broker (KRaft), run from the Maven Central jars: a single node,
or a 3-node cluster of combined broker+controllers (replication factor 3, min.insync.replicas=2).

Example:
    >>> broker = LocalBroker(load_stack(None))
    >>> broker.up()          # formats storage once, starts, waits for a metadata answer
    >>> broker.status().running
    True
    >>> broker.down()
"""

from __future__ import annotations

import base64
import contextlib
import random
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import psutil
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from core.config import StackConfig
from core.config.stack import NODE_PORT_STEP
from core.errors import StreamsimError
from core.jvm import JAVA_HINT, java_executable, kafka_classpath
from core.kafka.clients import base_config
from core.ports import port_in_use
from runs.process import kill_group, spawn

MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
#: `main`: the cluster every command uses (headquarters); `port`: a port's own cluster, which
#: MirrorMaker 2 replicates to `main` (`streamsim kafka mirror`).
Cluster = Literal["main", "port"]
CLUSTERS: tuple[Cluster, ...] = ("main", "port")


def port_stack(stack: StackConfig) -> StackConfig:
    """The stack as seen from the port cluster: `kafka.local` is `kafka.port_cluster` and no
    external bootstrap is set, so clients, admin calls and `LocalBroker` address the port."""
    data = stack.model_dump()
    data["kafka"]["local"] = data["kafka"]["port_cluster"]
    data["kafka"]["bootstrap"] = None
    return StackConfig.model_validate(data)


def running_java_pid(pid_path: Path, main_class: str) -> int | None:
    """The pid in `pid_path` if that process is alive and runs `main_class`, else None (a stale
    pid file, or the pid reused by another process)."""
    try:
        pid = int(pid_path.read_text().strip())
        proc = psutil.Process(pid)
        alive = proc.status() != psutil.STATUS_ZOMBIE and main_class in proc.cmdline()
    except (FileNotFoundError, ValueError, psutil.Error):
        return None
    return pid if alive else None


def spawn_daemon(command: list[str], log_path: Path, pid_path: Path) -> subprocess.Popen[bytes]:
    """Start `command` in a session of its own, output appended to `log_path`, its pid written
    to `pid_path`: it survives the CLI, and `down` stops it by pid."""
    with log_path.open("ab") as log:
        process = spawn(command, stdout=log, stderr=subprocess.STDOUT)
    pid_path.write_text(str(process.pid))
    return process


def stop_daemon(pid: int | None, pid_path: Path, timeout_s: float) -> bool:
    """Stop a `spawn_daemon` process (see `stop_pid`) and remove its pid file; False if it was
    not running."""
    if pid is not None:
        stop_pid(pid, timeout_s)
    pid_path.unlink(missing_ok=True)
    return pid is not None


def stop_pid(pid: int, timeout_s: float) -> None:
    """SIGTERM, then SIGKILL after `timeout_s`."""
    proc = psutil.Process(pid)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except psutil.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def new_cluster_id() -> str:
    """A random KRaft cluster id: a UUID in URL-safe base64, as `kafka-storage random-uuid` makes
    it. Like Kafka's `Uuid.randomUuid`, never one that starts with '-', which `kafka-storage
    format -t` would read as an option (one id in 64 did, and the broker failed to start)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class BrokerError(StreamsimError):
    """The local broker could not be started or stopped; the message says what to do."""


@dataclass(frozen=True)
class NodeStatus:
    node: int
    running: bool
    bootstrap: str
    pid: int | None
    log: str


@dataclass(frozen=True)
class BrokerStatus:
    """`running`, `pid` and `log` are node 1's on a cluster; `nodes` lists every node."""

    running: bool
    bootstrap: str
    pid: int | None
    log: str
    nodes: tuple[NodeStatus, ...] = ()

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        if len(self.nodes) <= 1:
            data.pop("nodes")  # the single broker keeps the documented four keys
        else:
            data["nodes"] = [asdict(n) for n in self.nodes]
        return data


class BrokerNode:
    """One Kafka JVM: a combined broker+controller with its own ports, data, log and pid."""

    def __init__(
        self, stack: StackConfig, home: Path, node_id: int, nodes: int, cluster: Cluster = "main"
    ) -> None:
        self.stack = stack
        self.cluster = cluster
        self.settings = stack.kafka.local
        self.node_id = node_id
        self.nodes = nodes
        offset = NODE_PORT_STEP * (node_id - 1)
        self.port = self.settings.port + offset
        self.controller_port = self.settings.controller_port + offset
        self.home = home
        self.log_path = home / "broker.log"
        self.pid_path = home / "broker.pid"
        self.data_dir = home / "data"

    @property
    def bootstrap(self) -> str:
        return f"{self.settings.host}:{self.port}"

    def running_pid(self) -> int | None:
        return running_java_pid(self.pid_path, MAIN_CLASS)

    def status(self) -> NodeStatus:
        pid = self.running_pid()
        return NodeStatus(
            self.node_id, pid is not None, self.bootstrap, pid, str(self.log_path.resolve())
        )

    def check_ports_free(self) -> None:
        step = f" + {NODE_PORT_STEP * (self.node_id - 1)} for node {self.node_id}"
        for key, port in (("port", self.port), ("controller_port", self.controller_port)):
            if port_in_use(self.settings.host, port):
                where = step if self.nodes > 1 else ""
                section, env = (
                    ("port_cluster", "STREAMSIM_PORT_KAFKA_")
                    if self.cluster == "port"
                    else ("local", "STREAMSIM_KAFKA_")
                )
                raise BrokerError(
                    f"port {port} on {self.settings.host} is already in use, so the local broker "
                    f"cannot listen there. Stop whatever holds it, or pick another port with "
                    f"kafka.{section}.{key}{where} in the stack config (or {env}"
                    f"{key.upper()}=<port>)."
                )

    def write_config(self) -> Path:
        s = self.settings
        topics = self.stack.kafka.topics
        replicas = 3 if self.nodes >= 3 else 1
        min_isr = 2 if self.nodes >= 3 else 1
        voters = ",".join(
            f"{i}@{s.host}:{s.controller_port + NODE_PORT_STEP * (i - 1)}"
            for i in range(1, self.nodes + 1)
        )
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{s.host}:{self.port},"
            f"CONTROLLER://{s.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{s.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir.resolve()),
            "num.partitions": str(topics.partitions),
            "log.retention.ms": str(topics.retention_ms),
            "log.retention.bytes": str(topics.retention_bytes),
            "auto.create.topics.enable": "false",
            # Production durability on a cluster: every write on 3 replicas, acks=all needs 2
            # in sync, and a replica that fell behind never becomes leader.
            "default.replication.factor": str(replicas),
            "min.insync.replicas": str(min_isr),
            "unclean.leader.election.enable": "false",
            "offsets.topic.replication.factor": str(replicas),
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": str(replicas),
            "transaction.state.log.min.isr": str(min_isr),
            "share.coordinator.state.topic.replication.factor": str(replicas),
            "share.coordinator.state.topic.min.isr": str(min_isr),
            "group.initial.rebalance.delay.ms": "0",
        }
        self.home.mkdir(parents=True, exist_ok=True)
        path = self.home / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.home / "log4j2.properties").write_text(_LOG4J2)
        return path

    def format(self, java: str, classpath: str, properties: Path, cluster_id: str) -> None:
        if (self.data_dir / "meta.properties").exists():
            return
        command = [java, "-cp", classpath, STORAGE_TOOL, "format", "-t", cluster_id]
        result = subprocess.run(
            [*command, "-c", str(properties)],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise BrokerError(
                f"formatting the storage of node {self.node_id} failed:\n"
                f"{result.stdout}{result.stderr}"
            )

    def start(self, java: str, classpath: str, properties: Path) -> subprocess.Popen[bytes]:
        heap = self.settings.heap
        command = [
            java,
            f"-Xmx{heap}",
            f"-Xms{heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={(self.home / 'log4j2.properties').resolve()}",
            "-cp",
            classpath,
            MAIN_CLASS,
            str(properties.resolve()),
        ]
        return spawn_daemon(command, self.log_path, self.pid_path)

    def answers(self, timeout_s: float = 1.0) -> bool:
        """True once this node answers a metadata request and lists itself as a broker."""
        admin = AdminClient(
            {**base_config(self.stack), "bootstrap.servers": self.bootstrap, "log_level": 0}
        )
        try:
            metadata = admin.list_topics(timeout=timeout_s)
        except KafkaException:
            return False
        return self.node_id in metadata.brokers

    def stop(self, timeout_s: float = 30.0) -> bool:
        """SIGTERM, then SIGKILL; False if the node was not running."""
        return stop_daemon(self.running_pid(), self.pid_path, timeout_s)

    def kill(self) -> int | None:
        """kill -9, as a crash would: no shutdown hook, no flush. Returns the pid killed."""
        pid = self.running_pid()
        if pid is None:
            return None
        proc = psutil.Process(pid)
        proc.kill()
        proc.wait(timeout=10)
        self.pid_path.unlink(missing_ok=True)
        return pid


class LocalBroker:
    """The local KRaft broker: one node, or `brokers=3` combined broker+controller nodes.

    `brokers` overrides `kafka.local.brokers`. A cluster lives in `<data>/kafka/cluster-3/`,
    apart from the single broker's `<data>/kafka/`, so the two never share storage.
    `cluster="port"` is the port's cluster instead (`kafka.port_cluster`), in `<data>/kafka/port/`.
    """

    def __init__(
        self, stack: StackConfig, brokers: int | None = None, cluster: Cluster = "main"
    ) -> None:
        if cluster not in CLUSTERS:
            raise BrokerError(f"unknown cluster {cluster!r}: one of {', '.join(CLUSTERS)}")
        self.cluster = cluster
        if cluster == "port":
            stack = port_stack(stack)
        elif stack.kafka.external:
            raise BrokerError(
                f"an external Kafka cluster is configured ({stack.kafka.bootstrap}); the local "
                "broker is only for when kafka.bootstrap and STREAMSIM_KAFKA_BOOTSTRAP are unset"
            )
        if brokers is not None and brokers != stack.kafka.local.brokers:
            data = stack.model_dump()
            data["kafka"]["local"]["brokers"] = brokers
            stack = StackConfig.model_validate(data)
        self.stack = stack
        self.settings = stack.kafka.local
        self.brokers = self.settings.brokers
        base = stack.dirs.data / "kafka"
        if cluster == "port":
            base = base / "port"
        self.home = base if self.brokers == 1 else base / f"cluster-{self.brokers}"
        self.nodes = [
            BrokerNode(
                stack,
                self.home if self.brokers == 1 else self.home / f"node-{i}",
                i,
                self.brokers,
                cluster,
            )
            for i in range(1, self.brokers + 1)
        ]
        first = self.nodes[0]
        self.log_path, self.pid_path, self.data_dir = first.log_path, first.pid_path, first.data_dir

    @property
    def bootstrap(self) -> str:
        return self.stack.kafka.bootstrap_servers

    def node(self, node_id: int) -> BrokerNode:
        return self.nodes[node_id - 1]

    def status(self) -> BrokerStatus:
        nodes = tuple(n.status() for n in self.nodes)
        first = nodes[0]
        return BrokerStatus(
            all(n.running for n in nodes), self.bootstrap, first.pid, first.log, nodes
        )

    def up(self) -> BrokerStatus:
        """Start every node that isn't running; return once each answers metadata requests."""
        stopped = [n for n in self.nodes if n.running_pid() is None]
        if not stopped:
            return self.status()
        for node in stopped:
            node.check_ports_free()
        java = java_executable()
        if java is None:
            raise BrokerError(f"no Java found (JAVA_HOME, else PATH): {JAVA_HINT}")
        classpath = kafka_classpath(self.stack)
        self.home.mkdir(parents=True, exist_ok=True)
        cluster_id = self._cluster_id()
        started = []
        for node in stopped:
            properties = node.write_config()
            node.format(java, classpath, properties, cluster_id)
            started.append((node, node.start(java, classpath, properties)))
        # A cluster's nodes are started together: none answers before the quorum has a majority.
        self._wait_ready(started)
        return self.status()

    def start_node(self, node_id: int) -> BrokerStatus:
        """(Re)start one node of the cluster, e.g. after `kill_node`."""
        node = self.node(node_id)
        if node.running_pid() is None:
            java = java_executable()
            if java is None:
                raise BrokerError(f"no Java found (JAVA_HOME, else PATH): {JAVA_HINT}")
            classpath = kafka_classpath(self.stack)
            properties = node.write_config()
            node.format(java, classpath, properties, self._cluster_id())
            self._wait_ready([(node, node.start(java, classpath, properties))])
        return self.status()

    def kill_node(self, node_id: int = 1) -> int | None:
        """kill -9 one node (a crash, not a shutdown); the pid killed, or None if none ran."""
        return self.node(node_id).kill()

    def down(self, timeout_s: float = 30.0) -> bool:
        """Stop the nodes this tool started (SIGTERM, then SIGKILL); False if none ran."""
        stopped = [n.stop(timeout_s) for n in reversed(self.nodes)]
        return any(stopped)

    def _cluster_id(self) -> str:
        """One cluster id for every node's storage, kept beside them."""
        path = self.home / "cluster.id"
        if path.exists():
            return path.read_text().strip()
        cluster_id = new_cluster_id()
        path.write_text(cluster_id)
        return cluster_id

    def _wait_ready(self, started: list[tuple[BrokerNode, subprocess.Popen[bytes]]]) -> None:
        deadline = time.monotonic() + self.settings.ready_timeout_s
        waiting = list(started)
        while time.monotonic() < deadline:
            for node, process in started:
                if process.poll() is not None:
                    self._abort(started)
                    raise BrokerError(
                        f"broker node {node.node_id} exited with status {process.returncode} "
                        f"while starting; last lines of {node.log_path}:\n{log_tail(node.log_path)}"
                    )
            waiting = [(n, p) for n, p in waiting if not n.answers()]
            if not waiting:
                return
            time.sleep(0.3)
        self._abort(started)
        node = waiting[0][0]
        raise BrokerError(
            f"broker node {node.node_id} did not answer a metadata request within "
            f"{self.settings.ready_timeout_s:.0f}s and was stopped; "
            f"see {node.log_path}:\n{log_tail(node.log_path)}"
        )

    @staticmethod
    def _abort(started: list[tuple[BrokerNode, subprocess.Popen[bytes]]]) -> None:
        for node, process in started:
            kill_group(process.pid, signal.SIGKILL)
            node.pid_path.unlink(missing_ok=True)


def free_node_ports(host: str, nodes: int, tries: int = 200) -> tuple[int, int]:
    """A client and a controller port that are free for every node (+100 per node), below the
    kernel's ephemeral range: a port from that range can be taken by any client's outgoing
    connection while its broker is down, and the broker could not restart on it."""
    low = _ephemeral_low()
    rng = random.Random()
    for _ in range(tries):
        port = rng.randrange(10_000, low - NODE_PORT_STEP * nodes - 2, 2)
        wanted = [port + NODE_PORT_STEP * i + j for i in range(nodes) for j in (0, 1)]
        if not any(port_in_use(host, p) for p in wanted):
            return port, port + 1
    raise BrokerError(f"found no free ports for {nodes} broker(s) on {host}")


def _ephemeral_low(default: int = 32_768) -> int:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default
    return max(low, 12_000)


@contextlib.contextmanager
def local_broker(stack: StackConfig, on_start: Callable[[], None] | None = None) -> Iterator[None]:
    """The local broker for the duration of a command: started if none runs (and stopped again
    afterwards), left alone if one runs or an external cluster is configured."""
    if stack.kafka.external or LocalBroker(stack).status().running:
        yield
        return
    if on_start:
        on_start()
    LocalBroker(stack).up()
    try:
        yield
    finally:
        LocalBroker(stack).down()


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


_LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = WARN
"""
