"""One run = the whole scenario: the component plan per scenario, the start and stop order, the
drain check (pure), and the run manager driving fake components (child processes standing in
for the simulator, the Spark job and the endpoint) through start, stop and failure."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from fastapi.testclient import TestClient

from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from api.main import create_app
from api.panel.models.runs import RunInfo
from core.config import StackConfig
from core.config.loader import read_yaml
from runs.components import (
    COMPONENTS,
    STOP_SIGNALS,
    InvalidComponents,
    Plan,
    job_pipeline,
    job_progress,
    load_pipelines,
    plan_components,
    start_order,
    stop_order,
)
from runs.manager import RunManager
from runs.overrides import apply_overrides
from runs.run import Part, Run, RunSpec
from scenarios.catalog import ScenarioConfig
from tests.conftest import REPO_ROOT

SCENARIOS = REPO_ROOT / "config" / "scenarios"
PIPELINES = load_pipelines(REPO_ROOT / "config" / "pipelines")
ACTIVITY = "cards.activity"
TOKEN = "ctl-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def scenario(name: str, overrides: dict[str, Any] | None = None) -> ScenarioConfig:
    data = apply_overrides(read_yaml(SCENARIOS / f"{name}.yaml"), overrides or {})
    return ScenarioConfig.model_validate(data)


def plan(name: str, overrides: dict[str, Any] | None = None, **kwargs: Any) -> Plan:
    return plan_components(scenario(name, overrides), PIPELINES, activity_topic=ACTIVITY, **kwargs)


# -- the plan (pure) -------------------------------------------------------------------------

POS = {"domain": {"delivery": "http"}}


@pytest.mark.parametrize(
    ("name", "overrides", "components", "job", "inputs"),
    [
        ("cards", None, ("job", "simulator"), "cards", ("cards.transactions",)),
        ("cards", POS, ("endpoint", "job", "simulator"), "cards", (ACTIVITY,)),
        ("sensors", None, ("job", "simulator"), "sensors", ("sensors.readings",)),
        (
            "vehicles",
            None,
            ("job", "simulator"),
            "vehicles",
            ("vehicles.telemetry",),
        ),
        ("shipping", None, ("simulator",), None, ()),
    ],
)
def test_each_scenario_plans_what_it_needs(
    name: str,
    overrides: dict[str, Any] | None,
    components: tuple[str, ...],
    job: str | None,
    inputs: tuple[str, ...],
) -> None:
    chosen = plan(name, overrides)
    assert chosen.components == components  # start order: endpoint, job, simulator
    assert chosen.job == job and chosen.job_inputs == inputs


def test_the_job_reads_the_run_topic_not_the_pipeline_files() -> None:
    chosen = plan("sensors", {"entities": 5}, requested=None)
    data = scenario("sensors").model_dump()
    data["domain"]["topic"] = "sensors.readings-mine"
    mine = plan_components(ScenarioConfig.model_validate(data), PIPELINES, activity_topic=ACTIVITY)
    assert chosen.job_inputs == ("sensors.readings",)
    assert mine.job == "sensors" and mine.job_inputs == ("sensors.readings-mine",)


def test_requested_components_are_checked() -> None:
    assert plan("cards", POS, requested=["simulator"]).components == ("simulator",)
    only = plan("cards", POS, requested=["simulator", "endpoint"])
    assert only.components == ("endpoint", "simulator") and only.job is None
    with pytest.raises(InvalidComponents, match="must include the simulator"):
        plan("sensors", requested=["job"])
    with pytest.raises(InvalidComponents, match="has no endpoint"):
        plan("sensors", requested=["simulator", "endpoint"])
    with pytest.raises(InvalidComponents, match="has no job"):
        plan("shipping", requested=["simulator", "job"])
    with pytest.raises(InvalidComponents, match="unknown components"):
        plan("shipping", requested=["simulator", "spark"])
    with pytest.raises(InvalidComponents, match="without a stack"):
        plan("sensors", requested=["simulator", "job"], available=["simulator"])
    # Without a stack, the default is what can start: the simulator.
    assert plan("sensors", available=["simulator"]).components == ("simulator",)


def test_the_job_stops_on_its_ctrl_c_the_others_on_sigterm() -> None:
    assert STOP_SIGNALS == {
        "simulator": signal.SIGTERM,
        "job": signal.SIGINT,
        "endpoint": signal.SIGTERM,
    }


def test_start_and_stop_order() -> None:
    assert start_order(COMPONENTS) == ("endpoint", "job", "simulator")
    assert stop_order(["endpoint", "simulator", "job"]) == ("simulator", "job", "endpoint")
    assert stop_order(["job", "simulator"]) == ("simulator", "job")
    assert plan("cards", POS).stop_order() == ("simulator", "job", "endpoint")


def test_the_job_pipeline_copy_starts_at_the_topic_ends() -> None:
    chosen = plan("cards", POS)
    data = job_pipeline(chosen, {ACTIVITY: {1: 7, 0: 3}})
    assert data["job"] == "cards" and data["input_topics"] == [ACTIVITY]
    assert json.loads(data["starting_offsets"]) == {ACTIVITY: {"0": 3, "1": 7}}
    assert data["watermark"] == "2 minutes"  # the rest is the file's


def report(query: str, at: int, rows: int = 0, job: str = "sensors") -> dict[str, Any]:
    return {"job": job, "query": query, "at": at, "input_rows": rows, "duration_ms": 100}


def test_job_progress_is_the_jobs_reports_since_it_started() -> None:
    queries = [
        report("b", 2_000),
        report("a", 3_000),
        report("old", 500),  # an earlier run's
        report("x", 3_000, job="cards"),
        {"job": "sensors", "query": "no-time"},
    ]
    assert [q["query"] for q in job_progress(queries, "sensors", 1_000)] == ["a", "b"]


# -- the manager with fake components --------------------------------------------------------

FAKE = r"""
import signal, subprocess, sys, time
name, order, mode = sys.argv[1:4]
def term(*_):
    with open(order, "a") as f:
        f.write(name + "\n")
    sys.exit(0)
def drain(*_):  # the job's drain request: done at once, or a failing or deaf drain
    if mode == "drainfails":
        sys.stderr.write("error: the drain broke\n")
        sys.exit(3)
    if mode != "deaf":
        term()
signal.signal(signal.SIGTERM, term)
signal.signal(signal.SIGINT, term)  # the job's stop
signal.signal(signal.SIGUSR1, drain)
if mode == "grandchild":  # left in the group, deaf to stops: only the group's SIGKILL ends it
    subprocess.Popen([sys.executable, "-c", "import signal, time; "
        "[signal.signal(s, signal.SIG_IGN) for s in (signal.SIGTERM, signal.SIGINT)]; "
        "time.sleep(120)"])
if mode in ("exit3", "exit3late"):  # late: after a "done" simulator, even on a loaded machine
    time.sleep(0.5 if mode == "exit3" else 4.0)
    sys.stderr.write("error: the job broke\n")
    sys.exit(3)
if mode == "done":
    time.sleep(0.5)
    print('{"events": 1}')
    sys.exit(0)
print("ready", flush=True)
time.sleep(120)
"""


class Progress:
    """A metrics feed: one empty batch of the job, reported now."""

    def __init__(self, job: str) -> None:
        self.job = job

    def queries(self, now_ms: int) -> list[dict[str, Any]]:
        return [report("counts", now_ms, rows=0, job=self.job)]


def fakes(
    order: Path, seen: list[tuple[str, RunSpec]], **modes: str
) -> dict[Any, Callable[[RunSpec], list[str]]]:
    def command(name: str) -> Callable[[RunSpec], list[str]]:
        def make(spec: RunSpec) -> list[str]:
            seen.append((name, spec))
            return [sys.executable, "-c", FAKE, name, str(order), modes.get(name, "serve")]

        return make

    return {name: command(name) for name in COMPONENTS}


@pytest.fixture
def scenario_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "scenarios"
    folder.mkdir()
    for name in ("cards", "sensors"):
        shutil.copy(SCENARIOS / f"{name}.yaml", folder / f"{name}.yaml")
    return folder


def make_manager(
    tmp_path: Path,
    scenario_dir: Path,
    seen: list[tuple[str, RunSpec]],
    healthy: Callable[[str], bool] = lambda url: True,
    **modes: str,
) -> RunManager:
    stack = StackConfig.model_validate({"dirs": {"data": str(tmp_path / "data")}})
    manager = RunManager.for_stack(
        stack,
        scenario_dir=scenario_dir,
        pipeline_dir=REPO_ROOT / "config" / "pipelines",
        commands=fakes(tmp_path / "order.log", seen, **modes),
        offsets=lambda stack, names: {n: {0: 11} for n in names},
        healthy=healthy,
        stop_timeout_s=1.0,
        drain_timeout_s=5.0,
        poll_s=0.05,
    )
    return manager


def wait_for(predicate: Callable[[], bool], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached")


def wait_ready(log: Path) -> None:
    wait_for(lambda: b"ready" in log.read_bytes())


def groups_alive(run: Run) -> list[psutil.Process]:
    """Every process still in one of the run's components' process groups."""
    groups = {p.pid for p in run.parts.values() if p.pid is not None}
    alive = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) in groups and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except (psutil.Error, ProcessLookupError):
            continue
    return alive


def test_a_pos_run_starts_endpoint_job_simulator_and_stops_them_in_order(
    tmp_path: Path, scenario_dir: Path
) -> None:
    seen: list[tuple[str, RunSpec]] = []
    up = threading.Event()
    checks: list[str] = []

    def healthy(url: str) -> bool:
        checks.append(url)
        return up.is_set()

    runs = make_manager(tmp_path, scenario_dir, seen, healthy=healthy,
                        job="grandchild")  # fmt: skip
    runs.progress = Progress("cards")
    run = runs.start("cards", overrides=POS)
    try:
        assert run.plan.components == ("endpoint", "job", "simulator")
        wait_for(lambda: len(checks) >= 3)  # the simulator waits for the endpoint's health check
        assert run.parts["simulator"].pid is None and run.pid is None
        assert run.parts["simulator"].state == "starting"
        assert run.parts["endpoint"].state == "starting"
        up.set()
        wait_for(lambda: all(p.state == "running" for p in run.parts.values()))
        started = [run.parts[c].started_at or 0 for c in ("endpoint", "job", "simulator")]
        assert started == sorted(started)
        assert run.pid == run.parts["simulator"].pid
        # The run's files: the job on its own checkpoints, reading the endpoint's decisions
        # from where they ended; the simulator posting to the run's own endpoint.
        url = run.parts["endpoint"].url
        assert url is not None and url.startswith("http://127.0.0.1:")
        stack = yaml.safe_load((run.workdir / "stack.yaml").read_text())
        assert stack["dirs"]["checkpoints"] == str(run.workdir / "checkpoints")
        assert stack["api"]["port"] == int(url.rsplit(":", 1)[1])
        pipeline = yaml.safe_load((run.workdir / "pipeline.yaml").read_text())
        assert pipeline["input_topics"] == [ACTIVITY]
        assert json.loads(pipeline["starting_offsets"]) == {ACTIVITY: {"0": 11}}
        posted = yaml.safe_load((run.workdir / "scenario.yaml").read_text())
        assert posted["domain"]["endpoint"]["url"] == f"{url}/v1/transactions"
        assert run.parts["job"].progress and run.parts["job"].progress[0]["query"] == "counts"
        for name in ("endpoint", "job", "simulator"):  # their SIGTERM handlers are set
            wait_ready(run.workdir / ("stdout.log" if name == "simulator" else f"{name}.log"))
        stopped = runs.stop(run.run_id)
    finally:
        up.set()
        if run.status in ("running", "stopping"):
            runs.stop(run.run_id)
    assert stopped.status == "stopped"
    order = (tmp_path / "order.log").read_text().split()
    assert order == ["simulator", "job", "endpoint"]
    assert {p.name: p.state for p in stopped.parts.values()} == dict.fromkeys(
        ("endpoint", "job", "simulator"), "stopped"
    )
    assert groups_alive(stopped) == []  # the job's SIGTERM-deaf grandchild too
    body = RunInfo.model_validate(stopped.to_dict()).model_dump()
    assert [c["name"] for c in body["components"]] == ["endpoint", "job", "simulator"]
    assert body["job"] == "cards"


def test_a_finished_simulator_stops_the_job_once_drained(
    tmp_path: Path, scenario_dir: Path
) -> None:
    seen: list[tuple[str, RunSpec]] = []
    runs = make_manager(tmp_path, scenario_dir, seen, simulator="done")
    runs.progress = Progress("sensors")
    run = runs.start("sensors")
    assert run.done.wait(180)
    assert run.status == "finished" and run.error is None and run.summary == {"events": 1}
    assert run.parts["simulator"].state == "exited" and run.parts["simulator"].exit_code == 0
    assert run.parts["job"].state == "stopped"
    assert (tmp_path / "order.log").read_text().split() == ["job"]
    assert groups_alive(run) == []


def test_a_job_that_does_not_drain_in_time_is_stopped(tmp_path: Path, scenario_dir: Path) -> None:
    seen: list[tuple[str, RunSpec]] = []
    runs = make_manager(tmp_path, scenario_dir, seen, simulator="done", job="deaf")
    runs.drain_timeout_s = 0.5
    runs.progress = Progress("sensors")
    run = runs.start("sensors")
    assert run.done.wait(180)
    assert run.status == "finished", run.error
    job = run.parts["job"]
    assert job.state == "stopped" and job.draining and job.signalled  # SIGINT after the drain
    assert (job.ended_at or 0) - (run.parts["simulator"].ended_at or 0) >= 500
    assert groups_alive(run) == []


def test_a_job_whose_drain_fails_fails_the_run(tmp_path: Path, scenario_dir: Path) -> None:
    seen: list[tuple[str, RunSpec]] = []
    runs = make_manager(tmp_path, scenario_dir, seen, simulator="done", job="drainfails")
    runs.progress = Progress("sensors")
    run = runs.start("sensors")
    assert run.done.wait(180)
    assert run.parts["job"].state == "exited" and run.parts["job"].exit_code == 3
    assert run.status == "failed" and run.error is not None and "the drain broke" in run.error


def test_a_job_that_exits_fails_the_run_and_stops_the_simulator(
    tmp_path: Path, scenario_dir: Path
) -> None:
    seen: list[tuple[str, RunSpec]] = []
    runs = make_manager(tmp_path, scenario_dir, seen, job="exit3")
    run = runs.start("sensors")
    assert run.done.wait(180)
    assert run.status == "failed"
    assert run.error is not None and "job exited with code 3" in run.error
    assert "the job broke" in run.error
    assert run.parts["job"].state == "exited" and run.parts["job"].exit_code == 3
    assert run.parts["simulator"].state == "stopped"
    assert groups_alive(run) == []


def test_an_endpoint_that_never_answers_fails_the_run(tmp_path: Path, scenario_dir: Path) -> None:
    seen: list[tuple[str, RunSpec]] = []
    runs = make_manager(tmp_path, scenario_dir, seen, healthy=lambda url: False)
    runs.endpoint_timeout_s = 0.5
    run = runs.start("cards", overrides=POS, components=["simulator", "endpoint"])
    assert run.done.wait(180)
    assert run.status == "failed" and run.error is not None and "did not answer" in run.error
    assert run.parts["simulator"].pid is None and run.parts["simulator"].state == "stopped"
    assert groups_alive(run) == []


# -- the routes --------------------------------------------------------------------------------


@pytest.fixture
def client(tmp_path: Path, scenario_dir: Path) -> Iterator[tuple[TestClient, RunManager]]:
    runs = make_manager(tmp_path, scenario_dir, [])
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", TOKEN),
        publisher=MemoryPublisher(),
    )
    with TestClient(create_app(service, run_manager=runs)) as http:
        yield http, runs


def test_components_are_validated(client: tuple[TestClient, RunManager]) -> None:
    http, _ = client
    for components, needle in [
        (["job"], "must include the simulator"),
        (["simulator", "endpoint"], "has no endpoint"),
        (["simulator", "simulator"], "must not repeat"),
        (["simulator", "spark"], "simulator"),
        ([], "at least 1"),
    ]:
        answer = http.post(
            "/v1/control/runs",
            json={"scenario": "sensors", "components": components},
            headers=AUTH,
        )
        assert answer.status_code == 422, answer.text
        assert needle in answer.text
        assert answer.json()["detail"][0]["loc"][:2] == ["body", "components"]


def test_the_simulator_only_and_private_component_fields(
    client: tuple[TestClient, RunManager],
) -> None:
    http, runs = client
    started = http.post(
        "/v1/control/runs",
        json={"scenario": "sensors", "components": ["simulator"]},
        headers=AUTH,
    )
    assert started.status_code == 201, started.text
    body = started.json()
    assert [c["name"] for c in body["components"]] == ["simulator"] and body["job"] is None
    run = runs.get(body["run_id"])
    wait_ready(run.workdir / "stdout.log")
    (open_view,) = http.get("/v1/runs").json()["runs"]
    (component,) = open_view["components"]
    assert component["state"] == "running" and component["pid"] == run.pid
    assert component["log"] is None and component["log_tail"] is None
    full = http.get(f"/v1/runs/{run.run_id}", headers=AUTH).json()
    assert full["components"][0]["log"] == str(run.workdir / "stderr.log")
    stopped = http.delete(f"/v1/control/runs/{run.run_id}", headers=AUTH).json()
    assert stopped["status"] == "stopped"
    assert stopped["components"][0]["state"] == "stopped"


def test_a_component_log_tail_is_its_end(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"x" * 100_000 + b"\nthe last line\n")
    part = Part("job", log)
    tail = part.to_dict()["log_tail"]
    assert tail.endswith("the last line") and len(tail) <= 2000
    assert part.to_dict(private=False)["log_tail"] is None
    assert Part("job", tmp_path / "missing.log").to_dict()["log_tail"] == ""


class LateProgress:
    """A metrics feed whose job reports its first (empty) batch only once `ready()`."""

    def __init__(self, job: str, ready: Callable[[], bool]) -> None:
        self.job, self.ready = job, ready

    def queries(self, now_ms: int) -> list[dict[str, Any]]:
        return [report("counts", now_ms, rows=0, job=self.job)] if self.ready() else []


def test_a_job_still_starting_when_the_simulator_finishes_gets_time_to_start(
    tmp_path: Path, scenario_dir: Path
) -> None:
    seen: list[tuple[str, RunSpec]] = []
    runs = make_manager(tmp_path, scenario_dir, seen, simulator="done")
    runs.drain_timeout_s = 0.2  # shorter than the job's start: the start is waited for first
    started: list[Run] = []

    first_batch: list[int] = []  # when the job's first batch was reported (epoch ms)

    def late() -> bool:  # the job's first batch: 1.5 s after the simulator ended
        ended = started[0].parts["simulator"].ended_at if started else None
        ready = ended is not None and time.time() * 1000 - ended > 1500
        if ready and not first_batch:
            first_batch.append(int(time.time() * 1000))
        return ready

    runs.progress = LateProgress("sensors", late)
    started.append(run := runs.start("sensors"))
    assert run.done.wait(180)
    assert run.status == "finished", run.error
    job = run.parts["job"]
    assert job.progress, "stopped before its first batch"
    assert first_batch and (job.ended_at or 0) >= first_batch[0]  # drained after it, not before


def test_a_stop_does_not_wait_for_a_starting_job(tmp_path: Path, scenario_dir: Path) -> None:
    seen: list[tuple[str, RunSpec]] = []
    runs = make_manager(tmp_path, scenario_dir, seen)
    runs.drain_timeout_s = 0.2
    runs.job_start_timeout_s = 3600  # a stop that waited for the start would outlast its budget
    runs.progress = LateProgress("sensors", lambda: False)  # never starts
    run = runs.start("sensors")
    wait_ready(run.workdir / "stdout.log")
    assert runs.stop(run.run_id).status == "stopped"  # not "stopping": it ended in its budget


def test_a_job_that_dies_while_it_drains_fails_the_run(tmp_path: Path, scenario_dir: Path) -> None:
    seen: list[tuple[str, RunSpec]] = []
    runs = make_manager(tmp_path, scenario_dir, seen, simulator="done", job="exit3late")
    # no batch yet: the run waits for the job to drain, and it dies (4 s) while it waits
    runs.progress = LateProgress("sensors", lambda: False)
    run = runs.start("sensors")
    assert run.done.wait(180)
    assert run.parts["simulator"].exit_code == 0
    assert run.parts["job"].state == "exited" and run.parts["job"].exit_code == 3
    assert run.status == "failed", run.status
    assert run.error is not None and "job exited with code 3" in run.error
