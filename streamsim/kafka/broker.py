"""The embedded single-node Apache Kafka broker (KRaft), run from the Maven Central jars.

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
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from core.config import StackConfig
from core.errors import StreamsimError
from core.jvm import JAVA_HINT, java_executable, kafka_classpath
from core.kafka.admin import is_reachable
from core.ports import port_in_use

MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"


class BrokerError(StreamsimError):
    """The local broker could not be started or stopped; the message says what to do."""


@dataclass(frozen=True)
class BrokerStatus:
    running: bool
    bootstrap: str
    pid: int | None
    log: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class LocalBroker:
    def __init__(self, stack: StackConfig) -> None:
        if stack.kafka.external:
            raise BrokerError(
                f"an external Kafka cluster is configured ({stack.kafka.bootstrap}); the local "
                "broker is only for when kafka.bootstrap and STREAMSIM_KAFKA_BOOTSTRAP are unset"
            )
        self.stack = stack
        self.settings = stack.kafka.local
        self.home = stack.dirs.data / "kafka"
        self.log_path = self.home / "broker.log"
        self.pid_path = self.home / "broker.pid"
        self.data_dir = self.home / "data"

    @property
    def bootstrap(self) -> str:
        return f"{self.settings.host}:{self.settings.port}"

    def status(self) -> BrokerStatus:
        pid = self._running_pid()
        return BrokerStatus(pid is not None, self.bootstrap, pid, str(self.log_path.resolve()))

    def up(self) -> BrokerStatus:
        """Start the broker unless it already runs; return once it answers metadata requests."""
        if self._running_pid() is not None:
            return self.status()
        self._check_ports_free()
        java = java_executable()
        if java is None:
            raise BrokerError(f"no Java found (JAVA_HOME, else PATH): {JAVA_HINT}")
        classpath = kafka_classpath(self.stack)
        self.home.mkdir(parents=True, exist_ok=True)
        properties = self._write_config()
        if not (self.data_dir / "meta.properties").exists():
            self._format(java, classpath, properties)
        process = self._start(java, classpath, properties)
        self._wait_ready(process)
        return self.status()

    def down(self, timeout_s: float = 30.0) -> bool:
        """Stop the broker this tool started (SIGTERM, then SIGKILL); False if none ran."""
        pid = self._running_pid()
        if pid is None:
            self.pid_path.unlink(missing_ok=True)
            return False
        proc = psutil.Process(pid)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except psutil.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        self.pid_path.unlink(missing_ok=True)
        return True

    def _running_pid(self) -> int | None:
        try:
            pid = int(self.pid_path.read_text().strip())
            proc = psutil.Process(pid)
            alive = proc.status() != psutil.STATUS_ZOMBIE and MAIN_CLASS in proc.cmdline()
        except (FileNotFoundError, ValueError, psutil.Error):
            return None
        return pid if alive else None

    def _check_ports_free(self) -> None:
        for key, port in (
            ("port", self.settings.port),
            ("controller_port", self.settings.controller_port),
        ):
            if port_in_use(self.settings.host, port):
                raise BrokerError(
                    f"port {port} on {self.settings.host} is already in use, so the local broker "
                    f"cannot listen there. Stop whatever holds it, or pick another port with "
                    f"kafka.local.{key} in the stack config (or STREAMSIM_KAFKA_"
                    f"{key.upper()}=<port>)."
                )

    def _write_config(self) -> Path:
        s = self.settings
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{s.host}:{s.controller_port}",
            "listeners": f"PLAINTEXT://{s.host}:{s.port},CONTROLLER://{s.host}:{s.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{s.host}:{s.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir.resolve()),
            "num.partitions": str(self.stack.kafka.topics.partitions),
            "log.retention.ms": str(self.stack.kafka.topics.retention_ms),
            "log.retention.bytes": str(self.stack.kafka.topics.retention_bytes),
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        path = self.home / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.home / "log4j2.properties").write_text(_LOG4J2)
        return path

    def _format(self, java: str, classpath: str, properties: Path) -> None:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        result = subprocess.run(
            [
                java,
                "-cp",
                classpath,
                STORAGE_TOOL,
                "format",
                "-t",
                cluster_id,
                "-c",
                str(properties),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise BrokerError(
                f"formatting the broker storage failed:\n{result.stdout}{result.stderr}"
            )

    def _start(self, java: str, classpath: str, properties: Path) -> subprocess.Popen[bytes]:
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
        with self.log_path.open("ab") as log:
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # survives the CLI; `down` stops it by pid
            )
        self.pid_path.write_text(str(process.pid))
        return process

    def _wait_ready(self, process: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.settings.ready_timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self.pid_path.unlink(missing_ok=True)
                raise BrokerError(
                    f"the broker exited with status {process.returncode} while starting; "
                    f"last lines of {self.log_path}:\n{_tail(self.log_path)}"
                )
            if is_reachable(self.stack, timeout_s=1.0):
                return
            time.sleep(0.3)
        os.killpg(process.pid, signal.SIGKILL)
        self.pid_path.unlink(missing_ok=True)
        raise BrokerError(
            f"the broker did not answer a metadata request within "
            f"{self.settings.ready_timeout_s:.0f}s and was stopped; "
            f"see {self.log_path}:\n{_tail(self.log_path)}"
        )


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


def _tail(path: Path, lines: int = 15) -> str:
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
