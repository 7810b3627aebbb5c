"""Live pacing of a running run: the pacer's retune, the control file the simulator polls, the
engine taking it, `RunManager.retune` and `PATCH /v1/control/runs/{id}/pacing`, and the Runs
page's live form."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
import yaml
from fastapi.testclient import TestClient
from streamlit.testing.v1 import AppTest

from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from api.main import create_app
from runs.manager import CONTROL_FILE, RunManager, RunNotActive, simulate_command
from runs.run import RunSpec
from scenarios.catalog import ScenarioConfig, build_scenario
from simulators.engine import Engine
from simulators.pacing import CONTROL_POLL_S, Pacer, PacingControl
from simulators.sinks.memory import MemorySink
from tests.conftest import REPO_ROOT
from tests.unit.test_ui_pages import page_script, texts
from ui.client import ApiClient

START = 1_767_225_600_000
SENSORS_YAML = REPO_ROOT / "config" / "scenarios" / "sensors.yaml"
TOKEN = "ctl-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds


class Retune:
    """A control that hands out `changes` once the clock reaches `at` (wall seconds)."""

    def __init__(self, clock: FakeClock, at: float, changes: Mapping[str, Any]) -> None:
        self.clock, self.at, self.changes, self.polls = clock, at, changes, 0

    def __call__(self) -> Mapping[str, Any] | None:
        self.polls += 1
        if self.changes and self.clock.now >= self.at:
            changes, self.changes = self.changes, {}
            return changes
        return None


def sends(clock: FakeClock, pacer: Pacer, emit_ms: np.ndarray) -> list[float]:
    t0 = clock.now
    return [round(clock.now - t0, 3) for _ in pacer.chunks(emit_ms)]


# -- the pacer -------------------------------------------------------------------------------


def test_a_faster_speed_applies_to_what_is_not_sent_yet() -> None:
    clock = FakeClock()
    control = Retune(clock, 105.0, {"speed": 10.0})
    pacer = Pacer(1.0, START, clock=clock, sleep=clock.sleep, control=control)
    emit = START + np.array([0, 10_000, 20_000])
    # At speed 1 they would go at 0, 10 and 20 s. At 5 s the speed becomes 10: the simulated
    # time reached (5 s) stays, the 10 s event is 0.5 s away, the 20 s one 1.5 s.
    assert sends(clock, pacer, emit) == pytest.approx([0.0, 5.5, 6.5], abs=CONTROL_POLL_S)
    (retune,) = pacer.retunes
    assert retune["speed"] == 10.0 and retune["max_rate"] is None
    assert retune["sim_ms"] == pytest.approx(START + 5_000, abs=CONTROL_POLL_S * 1000)


def test_from_max_to_paced_starts_at_the_last_send() -> None:
    clock = FakeClock()
    control = Retune(clock, 0.0, {})
    pacer = Pacer(None, START, clock=clock, sleep=clock.sleep, control=control)
    emit = START + np.array([0, 1_000, 2_000])
    chunks = pacer.chunks(emit)
    assert next(chunks) == slice(0, 3)  # unpaced: all at once
    clock.now += 1
    control.changes = {"speed": 1.0}
    assert list(pacer.chunks(START + np.array([2_000, 3_000, 4_000]))) == [
        slice(0, 1),
        slice(1, 2),
        slice(2, 3),
    ]
    assert pacer.retunes[0]["sim_ms"] == START + 2_000
    assert clock.now - 101 == pytest.approx(2.0)  # 3 s and 4 s: 1 and 2 s after 2 s


def test_a_rate_cap_is_lifted_live() -> None:
    clock = FakeClock()
    control = Retune(clock, 102.0, {"max_rate": None})
    pacer = Pacer(None, START, max_rate=1.0, clock=clock, sleep=clock.sleep, control=control)
    times = sends(clock, pacer, START + np.zeros(10, dtype=np.int64))
    # One a second until the cap goes at 2 s, then the other seven at once.
    assert times[:3] == pytest.approx([0.0, 1.0, 2.0], abs=CONTROL_POLL_S)
    assert len(times) == 4 and pacer.max_rate is None


def test_without_a_control_a_wait_is_one_sleep() -> None:
    clock = FakeClock()
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.sleep(seconds)

    pacer = Pacer(1.0, START, clock=clock, sleep=sleep)
    assert sends(clock, pacer, START + np.array([0, 30_000])) == [0.0, 30.0]
    assert slept == [30.0] and pacer.retunes == []


# -- the control file ------------------------------------------------------------------------


def write(path: Path, data: object) -> None:
    part = path.with_suffix(".part")
    part.write_bytes(orjson.dumps(data))
    os.replace(part, path)


def test_the_control_file_is_read_when_it_changes(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / CONTROL_FILE
    control = PacingControl(path, clock=clock)
    assert control() is None  # no file yet
    write(path, {"speed": 5, "max_rate": None})
    clock.now += CONTROL_POLL_S
    assert control() == {"speed": 5.0, "max_rate": None}
    clock.now += CONTROL_POLL_S
    assert control() is None  # unchanged
    write(path, {"speed": "max"})
    assert control() is None  # looked at too soon
    clock.now += CONTROL_POLL_S
    assert control() == {"speed": "max"}


@pytest.mark.parametrize(
    "bad", [b"{", b"[1]", b'{"speed": -1}', b'{"entities": 5}', b'{"max_rate": 0}']
)
def test_a_bad_control_file_is_skipped_and_logged(
    tmp_path: Path, bad: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / CONTROL_FILE
    path.write_bytes(bad)
    assert PacingControl(path)() is None
    assert "pacing control" in caplog.text


def test_the_engine_takes_a_retune(tmp_path: Path) -> None:
    data = yaml.safe_load(SENSORS_YAML.read_text())
    data.update(entities=20, duration_s=120)
    config = ScenarioConfig.model_validate(data)
    path = tmp_path / CONTROL_FILE
    write(path, {"speed": "max"})
    control = PacingControl(path)
    engine = Engine(build_scenario(config), config, MemorySink(), speed=1.0, control=control)
    summary = engine.run()
    # 120 simulated seconds at speed 1 would wait 2 minutes; the first look, before the first
    # send, set the speed to max: the pacer never waited.
    assert engine.pacer.waited_s == 0.0 and summary.events > 100
    assert [r["speed"] for r in summary.to_json()["retunes"]] == [None]


# -- the run manager and the route -----------------------------------------------------------


SLEEPER = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); " + (
    "time.sleep(60)"
)


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[RunManager]:
    folder = tmp_path / "scenarios"
    folder.mkdir()
    shutil.copy(SENSORS_YAML, folder / "sensors.yaml")
    seen: list[RunSpec] = []

    def command(spec: RunSpec) -> list[str]:
        seen.append(spec)
        return [sys.executable, "-c", SLEEPER]

    manager = RunManager(tmp_path / "runs", scenario_dir=folder, command=command)
    manager.seen = seen  # type: ignore[attr-defined]
    yield manager
    manager.close()


def test_the_run_gets_a_control_file(tmp_path: Path) -> None:
    spec = RunSpec("r1", tmp_path / "s.yaml", None, None, None, None, tmp_path / CONTROL_FILE)
    command = simulate_command(spec)
    assert command[command.index("--control") + 1] == str(tmp_path / CONTROL_FILE)


def test_retune_writes_every_value_set_so_far(runs: RunManager) -> None:
    run = runs.start("sensors")
    (spec,) = runs.seen  # type: ignore[attr-defined]
    assert spec.control_file == run.workdir / CONTROL_FILE
    runs.retune(run.run_id, {"max_rate": 500.0})
    runs.retune(run.run_id, {"speed": "max"})
    assert orjson.loads(spec.control_file.read_bytes()) == {"max_rate": 500.0, "speed": "max"}
    assert run.to_dict(private=False)["live"] == {"max_rate": 500.0, "speed": "max"}
    with pytest.raises(ValueError, match="entities"):
        runs.retune(run.run_id, {"entities": 5})
    runs.stop(run.run_id)
    with pytest.raises(RunNotActive):
        runs.retune(run.run_id, {"speed": 2.0})


@pytest.fixture
def client(runs: RunManager) -> Iterator[TestClient]:
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", TOKEN),
        publisher=MemoryPublisher(),
    )
    with TestClient(create_app(service, run_manager=runs)) as test_client:
        yield test_client


def test_patch_retunes_a_running_run(client: TestClient, runs: RunManager) -> None:
    run_id = client.post("/v1/control/runs", json={"scenario": "sensors"}, headers=AUTH)
    run_id = run_id.json()["run_id"]
    url = f"/v1/control/runs/{run_id}/pacing"
    assert client.patch(url, json={"speed": 5}).status_code == 401
    nope = client.patch("/v1/control/runs/nope/pacing", json={"speed": 5}, headers=AUTH)
    assert nope.status_code == 404
    for bad in ({}, {"speed": None}, {"speed": 0}, {"max_rate": -1}, {"entities": 5}):
        response = client.patch(url, json=bad, headers=AUTH)
        assert response.status_code == 422, (bad, response.text)
    response = client.patch(url, json={"speed": 5, "max_rate": None}, headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.json()["live"] == {"max_rate": None, "speed": 5.0}
    assert client.get("/v1/runs").json()["runs"][0]["live"] == {"max_rate": None, "speed": 5.0}
    control = orjson.loads((runs.get(run_id).workdir / CONTROL_FILE).read_bytes())
    assert control == {"max_rate": None, "speed": 5.0}
    client.delete(f"/v1/control/runs/{run_id}", headers=AUTH)
    stopped = client.patch(url, json={"speed": 1}, headers=AUTH)
    assert stopped.status_code == 409 and stopped.json()["detail"]["run_id"] == run_id


# -- the Runs page ---------------------------------------------------------------------------


RUNNING = {
    "run_id": "sensors-1",
    "scenario": "sensors",
    "status": "running",
    "pid": 42,
    "speed": 2.0,
    "duration_s": 600.0,
    "started_at": START,
    "ended_at": None,
    "live": None,
    "overrides": {},
    "summary": None,
    "error": None,
}


def test_the_runs_page_sends_a_moved_speed_live() -> None:
    requests: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if request.url.path == "/v1/scenarios":
            return httpx.Response(200, json={"scenarios": []})
        if request.url.path == "/v1/runs":
            return httpx.Response(200, json={"runs": [RUNNING]})
        if request.method == "PATCH":
            return httpx.Response(200, json={**RUNNING, "live": json.loads(request.content)})
        return httpx.Response(404, json={"detail": "not here"})

    client = ApiClient("http://api", token="t0k", transport=httpx.MockTransport(handle))
    test = AppTest.from_function(page_script, args=("runs", client), default_timeout=30)
    test.run()
    assert not test.exception, test.exception
    assert test.select_slider(key="live-speed-sensors-1").value == 2.0
    test.select_slider(key="live-speed-sensors-1").set_value(30.0)
    next(b for b in test.button if b.label == "Apply").click().run()
    assert not test.exception, test.exception
    (patch,) = [r for r in requests if r.method == "PATCH"]
    assert patch.url.path == "/v1/control/runs/sensors-1/pacing"
    assert patch.headers["authorization"] == "Bearer t0k"
    assert json.loads(patch.content) == {"speed": 30.0}  # the cap was not moved: not sent
    assert "Could not" not in texts(test)
