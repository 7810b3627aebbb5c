"""The run manager with fake child commands, and the run routes through the real app."""

from __future__ import annotations

import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from api.main import create_app
from api.panel.models.runs import RunInfo, RunList, ScenarioList
from runs.manager import RunConflict, RunManager, UnknownRun, UnknownScenario, simulate_command
from runs.overrides import InvalidOverrides, apply_overrides
from runs.run import RunSpec
from scenarios.catalog import ScenarioConfig
from tests.conftest import REPO_ROOT

SENSORS_YAML = REPO_ROOT / "config" / "scenarios" / "sensors.yaml"
TOKEN = "ctl-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

FAKE = r"""
import json, signal, sys, time
mode = sys.argv[1]
if mode == "ok":
    print("simulated")
    print(json.dumps({"events": 10, "truth": 10, "duplicates": 0, "dropped": 0,
                      "outages": 0, "events_per_s": 5.0}))
elif mode == "fail":
    sys.stderr.write("error: the broker is not there\n")
    sys.exit(3)
elif mode == "sleep":
    def stop(*_):
        print("flushed", flush=True)
        sys.exit(130)
    signal.signal(signal.SIGTERM, stop)
    print("ready", flush=True)
    time.sleep(60)
elif mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ready", flush=True)
    time.sleep(60)
"""


def fake(mode: str, seen: list[RunSpec] | None = None) -> Callable[[RunSpec], list[str]]:
    def command(spec: RunSpec) -> list[str]:
        if seen is not None:
            seen.append(spec)
        return [sys.executable, "-c", FAKE, mode]

    return command


@pytest.fixture
def scenario_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "scenarios"
    folder.mkdir()
    shutil.copy(SENSORS_YAML, folder / "sensors.yaml")
    (folder / "broken.yaml").write_text("kind: scenario\nentities: -1\n")
    (folder / "other.yaml").write_text("kind: scenario\nname: other\nentities: 10\n")
    (folder / "unreadable.yaml").write_text("kind: scenario\nentities: [\n")
    return folder


def manager(tmp_path: Path, scenario_dir: Path, mode: str, **kwargs: object) -> RunManager:
    return RunManager(
        tmp_path / "runs",
        scenario_dir=scenario_dir,
        command=fake(mode, kwargs.pop("seen", None)),  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )


def wait_for(predicate: Callable[[], bool], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached")


def wait_ready(path: Path) -> None:
    wait_for(lambda: path.exists() and b"ready" in path.read_bytes())


# -- overrides -------------------------------------------------------------------------------


def test_overrides_merge_key_by_key_and_classes_by_name() -> None:
    data = yaml.safe_load(SENSORS_YAML.read_text())
    merged = apply_overrides(
        data,
        {
            "entities": 50,
            "delivery": {"duplicates": {"probability": 0.2}},
            "clock": {"offset_s": {"type": "constant", "value": 3}},
            "classes": {"env_sensor": {"delivery": {"drops": {"probability": 0.5}}}},
        },
    )
    config = ScenarioConfig.model_validate(merged)
    assert config.entities == 50
    assert data["entities"] == 20000  # the file's data is not changed
    # Top-level keys merged: the rest of duplicates stays as the file has it.
    assert merged["delivery"]["duplicates"] == {
        "probability": 0.2,
        "retry_delay_s": {"type": "lognormal", "median": 2.0, "sigma": 0.5},
    }
    assert merged["clock"]["offset_s"] == {"type": "constant", "value": 3}  # type changed
    by_name = {c.name: c for c in config.classes}
    assert by_name["env_sensor"].delivery.drops.probability == 0.5
    assert by_name["env_sensor"].delivery.duplicates.probability == 0.02  # its own key
    assert by_name["smart_meter"].delivery.duplicates.probability == 0.2  # inherited
    assert by_name["legacy_logger"].delivery.drops.probability == 0.01


def test_invalid_overrides_name_the_key(tmp_path: Path, scenario_dir: Path) -> None:
    runs = manager(tmp_path, scenario_dir, "ok")
    with pytest.raises(InvalidOverrides) as info:
        runs.start("sensors", overrides={"delivery": {"drops": {"probability": 1.5}}})
    (problem,) = info.value.problems
    assert problem["loc"] == ["delivery", "drops", "probability"]
    assert "delivery.drops.probability" in problem["msg"] and "1.5" in problem["msg"]
    with pytest.raises(InvalidOverrides) as info:
        runs.start("sensors", overrides={"pacing": {"sped": 2}})
    assert info.value.problems[0]["loc"] == ["pacing", "sped"]
    assert info.value.problems[0]["type"] == "not_tunable"  # off the allow-list
    with pytest.raises(InvalidOverrides) as info:
        runs.start(
            "sensors",
            overrides={"classes": {"env_sensor": {"delivery": {"drops": {"probability": -1}}}}},
        )
    problem = info.value.problems[0]
    assert problem["loc"][:2] == ["classes", "env_sensor"]
    assert "classes.env_sensor.delivery.drops.probability" in problem["msg"]
    with pytest.raises(InvalidOverrides) as info:
        runs.start("sensors", overrides={"classes": {"nope": {}}})
    assert info.value.problems[0]["loc"] == ["classes", "nope"]
    assert runs.list() == []  # nothing was started


def test_scenarios_are_listed_resolved_or_with_their_error(
    tmp_path: Path, scenario_dir: Path
) -> None:
    listed = {s["name"]: s for s in manager(tmp_path, scenario_dir, "ok").scenarios()}
    assert set(listed) == {"broken", "other", "sensors", "unreadable"}
    assert "not valid YAML" in listed["unreadable"]["error"]
    assert listed["sensors"]["config"]["entities"] == 20000
    assert listed["other"]["config"]["delivery"]["drops"]["probability"] == 0.0  # a default
    assert listed["broken"]["config"] is None and "entities" in listed["broken"]["error"]
    with pytest.raises(UnknownScenario, match="known: broken, other, sensors, unreadable"):
        manager(tmp_path, scenario_dir, "ok").start("card_nope")


# -- runs ------------------------------------------------------------------------------------


def test_a_finished_run_has_its_summary(tmp_path: Path, scenario_dir: Path) -> None:
    seen: list[RunSpec] = []
    runs = manager(tmp_path, scenario_dir, "ok", seen=seen)
    run = runs.start("sensors", speed=2.0, duration_s=30, overrides={"entities": 5})
    assert run.status == "running" and run.pid is not None
    assert run.done.wait(180)
    assert run.status == "finished" and run.exit_code == 0
    assert run.summary == {
        "events": 10,
        "truth": 10,
        "duplicates": 0,
        "dropped": 0,
        "outages": 0,
        "events_per_s": 5.0,
    }
    assert run.error is None and run.ended_at is not None and run.ended_at >= run.started_at
    (spec,) = seen
    written = ScenarioConfig.model_validate(yaml.safe_load(spec.scenario_file.read_text()))
    assert written.entities == 5 and spec.speed == 2.0 and spec.duration_s == 30
    assert written.run_id == run.run_id  # each run's ids are its own
    RunInfo.model_validate(run.to_dict())


def test_a_failed_run_keeps_the_tail_of_stderr(tmp_path: Path, scenario_dir: Path) -> None:
    run = manager(tmp_path, scenario_dir, "fail").start("sensors")
    assert run.done.wait(180)
    assert run.status == "failed" and run.exit_code == 3
    assert run.error == "error: the broker is not there"
    assert run.summary is None


def test_stop_sends_sigterm_and_one_run_per_scenario(tmp_path: Path, scenario_dir: Path) -> None:
    runs = manager(tmp_path, scenario_dir, "sleep")
    run = runs.start("sensors")
    wait_ready(run.workdir / "stdout.log")
    with pytest.raises(RunConflict) as conflict:
        runs.start("sensors")
    assert conflict.value.run.run_id == run.run_id
    other = runs.start("other")  # another scenario may run alongside
    wait_ready(other.workdir / "stdout.log")
    stopped = runs.stop(run.run_id)
    assert stopped.status == "stopped" and stopped.exit_code == 130
    assert b"flushed" in (run.workdir / "stdout.log").read_bytes()  # it handled SIGTERM
    again = runs.start("sensors")  # the scenario is free again
    assert runs.list()[0].run_id == again.run_id  # newest first
    runs.close()
    assert {r.status for r in runs.list()} == {"stopped"}
    assert runs.stop(run.run_id).status == "stopped"  # idempotent
    with pytest.raises(UnknownRun):
        runs.stop("nope")


def test_a_run_that_ignores_sigterm_is_killed(tmp_path: Path, scenario_dir: Path) -> None:
    runs = manager(tmp_path, scenario_dir, "stubborn", stop_timeout_s=0.5)
    run = runs.start("sensors")
    wait_ready(run.workdir / "stdout.log")
    stopped = runs.stop(run.run_id)
    assert stopped.status == "stopped" and stopped.exit_code == -signal.SIGKILL


def test_runs_get_the_pan_secret_but_not_the_control_token(
    tmp_path: Path, scenario_dir: Path
) -> None:
    runs = RunManager(
        tmp_path / "runs",
        scenario_dir=scenario_dir,
        env={"PATH": "/usr/bin", "STREAMSIM_API_TOKEN": "x", "STREAMSIM_PAN_SECRET": "y" * 16},
    )
    assert runs.env == {"PATH": "/usr/bin", "STREAMSIM_PAN_SECRET": "y" * 16}


def test_the_real_command_is_streamsim_simulate(tmp_path: Path) -> None:
    spec = RunSpec("r1", tmp_path / "s.yaml", tmp_path / "stack.yaml", "max", 60.0, 7)
    assert simulate_command(spec) == [
        sys.executable,
        "-m",
        "streamsim",
        "simulate",
        str(tmp_path / "s.yaml"),
        "--sink",
        "kafka",
        "--json",
        "--config",
        str(tmp_path / "stack.yaml"),
        "--speed",
        "max",
        "--duration",
        "60.0",
        "--seed",
        "7",
    ]


# -- routes ----------------------------------------------------------------------------------


def client_with(runs: RunManager | None, token: str | None = TOKEN) -> TestClient:
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", token),
        publisher=MemoryPublisher(),
    )
    return TestClient(create_app(service, run_manager=runs))


@pytest.fixture
def api(tmp_path: Path, scenario_dir: Path) -> Iterator[tuple[TestClient, RunManager]]:
    runs = manager(tmp_path, scenario_dir, "sleep")
    with client_with(runs) as client:
        yield client, runs


def test_control_routes_check_the_token(api: tuple[TestClient, RunManager]) -> None:
    client, runs = api
    body = {"scenario": "sensors", "speed": 1, "duration_s": 60}
    missing = client.post("/v1/control/runs", json=body)
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    wrong = client.post("/v1/control/runs", json=body, headers={"Authorization": "Bearer no"})
    assert wrong.status_code == 401
    assert runs.list() == []
    assert client.delete("/v1/control/runs/x").status_code == 401
    started = client.post("/v1/control/runs", json=body, headers=AUTH)
    assert started.status_code == 201, started.text
    info = RunInfo.model_validate(started.json())
    assert info.status == "running" and info.scenario == "sensors"
    assert client.delete(f"/v1/control/runs/{info.run_id}").status_code == 401
    stopped = client.delete(f"/v1/control/runs/{info.run_id}", headers=AUTH)
    assert stopped.status_code == 200 and stopped.json()["status"] == "stopped"


def test_control_routes_are_off_without_a_configured_token(
    tmp_path: Path, scenario_dir: Path
) -> None:
    with client_with(manager(tmp_path, scenario_dir, "ok"), token=None) as client:
        response = client.post("/v1/control/runs", json={"scenario": "other"}, headers=AUTH)
    assert response.status_code == 403 and "STREAMSIM_API_TOKEN" in response.text


def test_run_routes(api: tuple[TestClient, RunManager]) -> None:
    client, _ = api
    scenarios = ScenarioList.model_validate(client.get("/v1/scenarios").json())
    names = [s.name for s in scenarios.scenarios]
    assert names == ["broken", "other", "sensors", "unreadable"]
    unreadable = client.post("/v1/control/runs", json={"scenario": "unreadable"}, headers=AUTH)
    assert unreadable.status_code == 422
    assert unreadable.json()["detail"][0]["loc"] == ["body", "scenario"]
    post = client.post
    assert post("/v1/control/runs", json={"scenario": "nope"}, headers=AUTH).status_code == 404
    bad = post(
        "/v1/control/runs",
        json={"scenario": "sensors", "overrides": {"entities": 0}},
        headers=AUTH,
    )
    assert bad.status_code == 422
    (item,) = bad.json()["detail"]
    assert item["loc"] == ["body", "overrides", "entities"] and "entities" in item["msg"]
    bad_speed = post("/v1/control/runs", json={"scenario": "other", "speed": -1}, headers=AUTH)
    assert bad_speed.status_code == 422
    assert bad_speed.json()["detail"][0]["loc"][:2] == ["body", "speed"]
    first = post("/v1/control/runs", json={"scenario": "other", "speed": "max"}, headers=AUTH)
    assert first.status_code == 201
    run_id = first.json()["run_id"]
    conflict = post("/v1/control/runs", json={"scenario": "other"}, headers=AUTH)
    assert conflict.status_code == 409 and conflict.json()["detail"]["run_id"] == run_id
    listed = RunList.model_validate(client.get("/v1/runs").json())
    assert [r.run_id for r in listed.runs] == [run_id]
    assert client.get(f"/v1/runs/{run_id}").json()["speed"] == "max"
    assert client.get("/v1/runs/nope").status_code == 404
    assert client.delete("/v1/control/runs/nope", headers=AUTH).status_code == 404
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/control/runs", "/v1/control/runs/{run_id}", "/v1/runs", "/v1/scenarios"} <= set(
        paths
    )


def test_without_a_run_manager_the_routes_say_so() -> None:
    with client_with(None) as client:
        assert client.get("/v1/runs").status_code == 503
