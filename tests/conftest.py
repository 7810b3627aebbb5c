"""Shared fixtures. Integration tests get a real broker on free ports, private to the session."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from core.config import StackConfig
from streamsim.kafka.broker import LocalBroker
from tests import suite_report, xdist_groups

REPO_ROOT = Path(__file__).resolve().parent.parent
REPORTS = REPO_ROOT / ".data" / "test-reports"
#: The `streamsim` command of this checkout's environment.
STREAMSIM = str(Path(sys.executable).parent / "streamsim")


def streamsim_json(
    *args: str, env: dict[str, str] | None = None, exit_code: int = 0
) -> dict[str, Any]:
    """`streamsim ARGS --json` from the repository root: its last stdout line, parsed, once
    the command exited with `exit_code` (its output in the failure otherwise)."""
    done = subprocess.run(
        [STREAMSIM, *args, "--json"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == exit_code, done.stdout + done.stderr
    result: dict[str, Any] = orjson.loads(done.stdout.strip().splitlines()[-1])
    return result


#: The suite's short-lived Spark JVMs (`streamsim` children, standalone executors) run without
#: the C2 JIT and with the serial collector: their jobs are small and short, and on 2 cores
#: C2's compiles and G1's threads cost more CPU than they win back. test_chaos_lake plus
#: test_pipeline_vehicles on an idle machine: 445 → 312 CPU s, 241 → 191 s. The session's
#: in-process JVM (`spark`) serves the whole `spark` unit, so it keeps the defaults (with C1
#: only, that unit took 1,594 s against 1,219 s in an earlier run), as do benchmarks and
#: `make demo`.
SPARK_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("SPARK_SUBMIT_OPTS", SPARK_JVM_OPTS)


@contextlib.contextmanager
def jvm_defaults() -> Iterator[None]:
    """While a long-lived JVM starts: without the suite's `SPARK_JVM_OPTS` (a user's own
    `SPARK_SUBMIT_OPTS` stays)."""
    ours = os.environ.get("SPARK_SUBMIT_OPTS") == SPARK_JVM_OPTS
    if ours:
        del os.environ["SPARK_SUBMIT_OPTS"]
    try:
        yield
    finally:
        if ours:
            os.environ["SPARK_SUBMIT_OPTS"] = SPARK_JVM_OPTS


STARTED = pytest.StashKey[tuple[float, float]]()  # monotonic, epoch


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--records",
        type=int,
        default=2_000,
        help="Malformed records the event fuzzer sends into each job (full size: 10000).",
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_ports(count: int) -> int:
    """A free port with the `count - 1` ports above it free too (a server that takes a run)."""
    from core.ports import port_in_use

    for _ in range(200):
        port = free_port()
        above = range(port + 1, min(port + count, 65_536))
        if len(above) == count - 1 and not any(port_in_use("127.0.0.1", p) for p in above):
            return port
    raise RuntimeError(f"no {count} free ports in a row on 127.0.0.1")


def stack_for(tmp: Path, **kafka_local: object) -> StackConfig:
    """A stack whose data lives in `tmp` and whose jars come from the repo's cache."""
    return StackConfig.model_validate(
        {
            "kafka": {
                "local": {"port": free_port(), "controller_port": free_port(), **kafka_local}
            },
            "spark": {"shuffle_partitions": 2},
            "dirs": {
                "cache": str(REPO_ROOT / ".cache"),
                "data": str(tmp),
                "checkpoints": str(tmp / "checkpoints"),
                "lake": str(tmp / "lake"),
            },
        }
    )


@pytest.fixture(scope="session")
def kafka_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackConfig]:
    """A running single-node KRaft broker for the whole test session."""
    stack = stack_for(tmp_path_factory.mktemp("stack"))
    broker = LocalBroker(stack)
    broker.up()
    try:
        yield stack
    finally:
        broker.down()


@pytest.fixture(scope="session")
def spark(kafka_stack: StackConfig) -> Iterator[object]:
    """A real local Spark session with the Kafka connector, pointed at the session broker."""
    from pipeline.session import spark_session

    with jvm_defaults():
        session = spark_session(kafka_stack, app="tests")
    try:
        yield session
    finally:
        session.stop()


@pytest.hookimpl(wrapper=True)  # before -m deselects by the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> Iterator[None]:
    """Mark everything under `tests/integration/` `integration` (`-m "not integration"` is the
    unit suite), and queue the unit tests first, then the integration units longest first
    (`tests/xdist_groups.py`)."""
    for item in items:
        if "/integration/" in item.nodeid:
            item.add_marker(pytest.mark.integration)
    items.sort(key=lambda item: xdist_groups.queue_key(item.nodeid, REPO_ROOT))  # stable
    yield


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Under `--dist loadscope`: modules as units of work, the Spark modules as one."""
    if config.getvalue("dist") != "loadscope":
        return None
    return xdist_groups.ModuleScheduling(config, log)


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[STARTED] = (time.monotonic(), time.time())


def worker_of(report: pytest.TestReport) -> str:
    """The xdist worker that ran a report's test (`gw0`...), or `main` without xdist."""
    node = getattr(report, "node", None)
    return str(node.gateway.id) if node is not None else "main"


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """Write every test's time under `.data/test-reports/` and print the slowest."""
    reports = [
        report
        for category in terminalreporter.stats.values()
        for report in category
        if isinstance(report, pytest.TestReport)
    ]
    if not reports:
        return
    seconds = suite_report.per_test(reports)
    path = suite_report.write(seconds, REPORTS)
    started, started_epoch = config.stash[STARTED]
    workers = int(getattr(config.option, "numprocesses", 0) or 1)
    spans = [(worker_of(report), report.start, report.stop) for report in reports]
    placed = suite_report.per_worker(spans, started_epoch) if workers > 1 else []
    terminalreporter.section("suite time")
    for line in suite_report.summary(seconds, time.monotonic() - started, workers, placed):
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"every test's time: {path.relative_to(REPO_ROOT)}")
