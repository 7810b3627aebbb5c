"""Shared fixtures. Integration tests get a real broker on free ports, private to the session."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.config import StackConfig
from streamsim.kafka.broker import LocalBroker

REPO_ROOT = Path(__file__).resolve().parent.parent


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

    session = spark_session(kafka_stack, app="tests")
    try:
        yield session
    finally:
        session.stop()
