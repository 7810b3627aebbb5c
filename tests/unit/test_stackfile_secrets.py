"""The stack files `streamsim demo` and `streamsim bench` hand their children hold no Kafka
client secret: each caller is run up to the moment its child would start, and the file it
wrote is read there (the secret goes by `$STREAMSIM_KAFKA_CLIENT` instead)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import orjson
import pytest

from core.config import StackConfig
from core.config.loader import load_stack
from core.config.stack import KAFKA_CLIENT_ENV
from streamsim.stackfile import write_stack_file

SECRET = "s3cret-sasl-pw"
CLIENT = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "alice",
    "sasl.password": SECRET,
    "sasl.oauthbearer.config": f"principal=alice secret={SECRET}",
}


class Started(Exception):
    """Raised where the child would start: the stack file is written by then."""


@pytest.fixture
def stack(tmp_path: Path) -> StackConfig:
    return StackConfig.model_validate(
        {
            "kafka": {"bootstrap": "127.0.0.1:1", "client": CLIENT},  # external: no broker
            "dirs": {"data": str(tmp_path / "data")},
        }
    )


@pytest.fixture
def seen() -> Iterator[list[tuple[str, dict[str, str]]]]:
    """(stack file text, child environment) for each child started."""
    yield []


def _stack_file(args: list[str]) -> Path:
    return Path(args[args.index("--config") + 1])


def _check(seen: list[tuple[str, dict[str, str]]]) -> None:
    assert seen, "no child was started"
    for text, env in seen:
        assert "sasl.username" in text  # the file is the stack...
        assert SECRET not in text and "sasl.password" not in text  # ...without its secrets
        assert orjson.loads(env[KAFKA_CLIENT_ENV]) == {
            "sasl.password": SECRET,
            "sasl.oauthbearer.config": CLIENT["sasl.oauthbearer.config"],
        }


def test_write_stack_file_round_trips_through_the_environment(
    stack: StackConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "stack.yaml"
    env = write_stack_file(stack, path, env={"KEEP": "1"})
    text = path.read_text()
    assert SECRET not in text and "sasl.username: alice" in text
    assert env["KEEP"] == "1"
    monkeypatch.setenv(KAFKA_CLIENT_ENV, env[KAFKA_CLIENT_ENV])
    assert load_stack(path).kafka.client == stack.kafka.client  # what the child gets


def test_no_secret_no_variable(tmp_path: Path) -> None:
    env = write_stack_file(StackConfig(), tmp_path / "stack.yaml", env={})
    assert env == {}


def test_demo(
    stack: StackConfig,
    seen: list[tuple[str, dict[str, str]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamsim import demo

    def fake_run(*args: Any) -> Any:
        stack_file, env = args[3]
        seen.append((stack_file.read_text(), env))
        raise Started

    monkeypatch.setattr(demo, "local_broker", lambda _stack: nullcontext())
    monkeypatch.setattr(demo, "_run", fake_run)
    with pytest.raises(Started):
        demo.run_demo(stack, "sensors", 1.0, None)
    _check(seen)


def test_demo_endpoint(
    stack: StackConfig,
    seen: list[tuple[str, dict[str, str]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The card demo's fraud endpoint (a child of its own) reads the same file."""
    from streamsim import demo

    def fake_popen(command: list[str], **kwargs: Any) -> Any:
        seen.append((_stack_file(command).read_text(), kwargs["env"]))
        raise Started

    monkeypatch.setattr(demo, "local_broker", lambda _stack: nullcontext())
    monkeypatch.setattr(demo, "port_in_use", lambda *_: False)
    monkeypatch.setattr(demo.subprocess, "Popen", fake_popen)
    with pytest.raises(Started):
        demo.run_demo(stack, "cards", 1.0, None)
    _check(seen)


def test_bench_simulator(
    stack: StackConfig,
    seen: list[tuple[str, dict[str, str]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamsim.bench import simulator

    def fake_simulate(args: list[str], env: dict[str, str] | None = None) -> Any:
        assert env is not None
        seen.append((_stack_file(args).read_text(), env))
        raise Started

    monkeypatch.setattr(simulator, "simulate", fake_simulate)
    with pytest.raises(Started):
        simulator.bench_simulator(stack, Path("config/scenarios/sensors.yaml"), 10)
    _check(seen)


def test_bench_pipeline(
    stack: StackConfig,
    seen: list[tuple[str, dict[str, str]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamsim.bench.pipeline import topics as pipeline

    def fake_simulate(args: list[str], env: dict[str, str] | None = None) -> Any:
        assert env is not None
        seen.append((_stack_file(args).read_text(), env))
        raise Started

    monkeypatch.setattr(pipeline, "ensure_topics", lambda *_, **__: None)
    monkeypatch.setattr(pipeline, "simulate", fake_simulate)
    with pytest.raises(Started):
        pipeline.produce_input(stack, tmp_path, "t", 10, 5, "n")
    _check(seen)


def test_bench_api(
    stack: StackConfig,
    seen: list[tuple[str, dict[str, str]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamsim.bench import api

    def fake_server(name: str, command: list[str], log: Path, env: dict[str, str]) -> Any:
        seen.append((_stack_file(command).read_text(), env))
        raise Started

    monkeypatch.setattr(api, "ServerProcess", fake_server)
    with pytest.raises(Started):
        api.bench_api(stack)
    _check(seen)
