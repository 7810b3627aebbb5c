"""`streamsim simulate`: the JSON contract, files written, and clear errors for bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml
from typer.testing import CliRunner

from streamsim.cli import app

SMALL = {
    "kind": "scenario",
    "name": "tiny_fleet",
    "entities": 20,
    "duration_s": 10,
    "delivery": {"duplicates": {"probability": 0.2}},
}


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    return path


def test_jsonl_run_prints_the_contract_json(scenario_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["simulate", str(scenario_file), "--speed", "max", "--sink", "jsonl"]
    result = CliRunner().invoke(app, [*args, "--out", str(out), "--json", "--seed", "3"])
    assert result.exit_code == 0, result.output
    summary = orjson.loads(result.output.strip().splitlines()[-1])
    assert set(summary) >= {"events", "truth", "duplicates", "dropped", "outages", "events_per_s"}
    events = (out / "events.jsonl").read_bytes().splitlines()
    truth = (out / "truth.jsonl").read_bytes().splitlines()
    assert summary["events"] == len(events) > 0 and summary["truth"] == len(truth)
    assert summary["duplicates"] > 0


def test_event_count_mode(scenario_file: Path, tmp_path: Path) -> None:
    args = ["simulate", str(scenario_file), "--events", "123", "--speed", "max"]
    result = CliRunner().invoke(app, [*args, "--sink", "jsonl", "--out", str(tmp_path), "--json"])
    assert orjson.loads(result.output.splitlines()[-1])["events"] == 123


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--sink", "jsonl"], "--sink jsonl needs --out DIR"),
        (["--duration", "5", "--events", "5", "--sink", "jsonl", "--out", "x"], "not both"),
        (["--speed", "fast", "--sink", "jsonl", "--out", "x"], "use a positive number or 'max'"),
        (["--speed", "-2", "--sink", "jsonl", "--out", "x"], "use a positive number or 'max'"),
        (["--out", "x"], "--out is only for --sink jsonl"),
    ],
)
def test_usage_errors_exit_2_with_a_message(
    scenario_file: Path, extra: list[str], message: str
) -> None:
    result = CliRunner().invoke(app, ["simulate", str(scenario_file), *extra])
    assert result.exit_code == 2 and message in " ".join(result.output.split())


def test_bad_scenario_files_are_config_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**SMALL, "delivery": {"drops": {"probability": 3}}}))
    stack = tmp_path / "stack.yaml"
    stack.write_text("kind: stack\n")
    for path, message in (
        (bad, "key 'delivery.drops.probability' has bad value 3"),
        (stack, "expected a scenario config (kind: scenario), got kind 'stack'"),
    ):
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                "from streamsim.cli import main; main()",
                "simulate",
                str(path),
                "--sink",
                "jsonl",
                "--out",
                str(tmp_path / "o"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 2, result.stderr
        assert message in " ".join(result.stderr.split())


def test_an_unreachable_broker_is_a_clear_error_not_a_hang(tmp_path: Path) -> None:
    import socket

    from core.config import StackConfig
    from core.errors import StreamsimError
    from scenarios.catalog import ScenarioConfig, run_scenario
    from simulators.sinks.kafka import KafkaSink

    with socket.socket() as sock:  # a free port, where no broker listens
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    stack = StackConfig.model_validate({"kafka": {"bootstrap": f"127.0.0.1:{port}"}})
    sink = KafkaSink(stack, connect_timeout_s=1.0)
    with pytest.raises(StreamsimError, match=r"does not answer"):
        run_scenario(ScenarioConfig.model_validate(SMALL), sink, speed="max")
