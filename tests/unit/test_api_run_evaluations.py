"""Evaluating panel runs: the evaluations manager with a fake simulator and a fake `streamsim
evaluate`, and its routes through the real app (token, 404, 409, 422, schemas)."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
from fastapi.testclient import TestClient

from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from api.main import create_app
from api.panel.models.evaluations import RunEvaluation, RunEvaluationList
from runs.evaluations import (
    RECORD_FILE,
    EvaluationBusy,
    EvaluationSpec,
    NotEvaluable,
    RunEvaluations,
    RunNotScorable,
    UnknownEvaluation,
    evaluate_command,
)
from runs.manager import RunManager, UnknownRun
from runs.run import RunSpec
from tests.conftest import REPO_ROOT

TOKEN = "ctl-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PREFIX = "sf-1a2b-"
REPORT = {
    "scenario": "sensors",
    "run": {"id_prefix": PREFIX, "events": 10, "speed": 1.0},
    "paths": {"pipeline": {"spike": {"precision": 1.0, "recall": 0.5, "f1": 0.667, "support": 4}}},
    "late_dropped": 0,
    "hard_negative_alerts": 0,
}
#: A simulator that finishes with its `--json` summary, or runs until stopped.
SIMULATOR = r"""
import json, signal, sys, time
if sys.argv[1] != "ok":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    time.sleep(float(sys.argv[2]))
print(json.dumps({"events": 10, "id_prefix": sys.argv[3]}))
"""
#: `streamsim evaluate`: writes the report to --out (its args after the script), or fails.
EVALUATE = r"""
import json, sys, time
args = sys.argv[1:]
if args[0] == "fail":
    sys.stderr.write("error: no finished run of sensors\n")
    sys.exit(1)
time.sleep(float(args[1]))
out = args[args.index("--out") + 1]
report = json.loads(args[2])
report["argv"] = args
open(out, "w").write(json.dumps(report))
"""


def simulator(mode: str, seconds: float = 60.0) -> Callable[[RunSpec], list[str]]:
    return lambda spec: [sys.executable, "-c", SIMULATOR, mode, str(seconds), PREFIX]


def evaluator(
    mode: str = "ok", seconds: float = 0.0, seen: list[EvaluationSpec] | None = None
) -> Callable[[EvaluationSpec], list[str]]:
    def command(spec: EvaluationSpec) -> list[str]:
        if seen is not None:
            seen.append(spec)
        real = evaluate_command(spec)[4:]  # SCENARIO --run ... --out ...
        return [sys.executable, "-c", EVALUATE, mode, str(seconds), orjson.dumps(REPORT).decode(),
                *real]  # fmt: skip

    return command


@pytest.fixture
def scenario_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "scenarios"
    folder.mkdir()
    shutil.copy(REPO_ROOT / "config/scenarios/sensors.yaml", folder / "sensors.yaml")
    (folder / "other.yaml").write_text("kind: scenario\nname: other\nentities: 10\n")
    return folder


def manager(tmp_path: Path, scenario_dir: Path, mode: str, seconds: float = 60.0) -> RunManager:
    return RunManager(
        tmp_path / "runs",
        scenario_dir=scenario_dir,
        command=simulator(mode, seconds),
        stop_timeout_s=5,
        poll_s=0.05,
    )


def wait_for(predicate: Callable[[], bool], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def finished(runs: RunManager, scenario: str = "sensors", **kwargs: object) -> str:
    run = runs.start(scenario, **kwargs)  # type: ignore[arg-type]
    assert run.done.wait(180) and run.status == "finished", run
    return run.run_id


# -- the manager -----------------------------------------------------------------------------


def test_a_finished_run_is_scored_and_its_record_kept_with_its_knobs(
    tmp_path: Path, scenario_dir: Path
) -> None:
    runs = manager(tmp_path, scenario_dir, "ok")
    seen: list[EvaluationSpec] = []
    evaluations = RunEvaluations(runs, command=evaluator(seen=seen))
    run_id = finished(runs, speed=2.0, overrides={"entities": 50})
    evaluation = evaluations.start(run_id)
    assert evaluation.status in ("waiting", "running")
    wait_for(lambda: evaluation.status == "done")
    assert evaluation.report is not None and evaluation.report["paths"] == REPORT["paths"]
    (spec,) = seen
    assert (spec.scenario, spec.id_prefix) == ("sensors", PREFIX)  # the run's own prefix
    assert spec.out.parent == runs.get(run_id).workdir
    assert evaluation.knobs["speed"] == 2.0 and evaluation.knobs["overrides"] == {"entities": 50}
    # The record outlives this manager: a new one (a restarted API) reads it back.
    record = orjson.loads((runs.get(run_id).workdir / RECORD_FILE).read_bytes())
    assert record["status"] == "done" and record["knobs"]["overrides"] == {"entities": 50}
    again = RunEvaluations(runs)
    assert again.get(run_id).report == evaluation.report
    assert [e.run_id for e in again.list()] == [run_id]


def test_a_running_run_is_scored_once_it_has_finished(tmp_path: Path, scenario_dir: Path) -> None:
    runs = manager(tmp_path, scenario_dir, "sleep", seconds=1.0)
    evaluations = RunEvaluations(runs, command=evaluator())
    run = runs.start("sensors")
    evaluation = evaluations.start(run.run_id)
    assert evaluation.status == "waiting" and run.status == "running"
    wait_for(lambda: evaluation.status == "done")
    assert run.status == "finished" and evaluation.started_at is not None
    assert evaluation.started_at >= (run.ended_at or 0)


def test_a_stopped_run_cannot_be_scored(tmp_path: Path, scenario_dir: Path) -> None:
    runs = manager(tmp_path, scenario_dir, "sleep")
    evaluations = RunEvaluations(runs, command=evaluator())
    run = runs.start("sensors")
    waiting = evaluations.start(run.run_id)
    runs.stop(run.run_id)
    wait_for(lambda: waiting.status == "failed")  # asked while running, then stopped
    assert waiting.error is not None and "ended stopped" in waiting.error
    with pytest.raises(RunNotScorable, match="was stopped"):
        evaluations.start(run.run_id)


def test_one_evaluation_at_a_time_and_a_failure_says_why(
    tmp_path: Path, scenario_dir: Path
) -> None:
    runs = manager(tmp_path, scenario_dir, "ok")
    run_id = finished(runs)
    slow = RunEvaluations(runs, command=evaluator(seconds=2.0))
    first = slow.start(run_id)
    with pytest.raises(EvaluationBusy):
        slow.start(run_id)
    wait_for(lambda: first.status == "done")
    failing = RunEvaluations(runs, command=evaluator("fail"))
    failed = failing.start(run_id)
    wait_for(lambda: failed.status == "failed")
    assert failed.error is not None and "no finished run of sensors" in failed.error
    assert failed.report is None


def test_unknown_runs_and_scenarios_without_labels(tmp_path: Path, scenario_dir: Path) -> None:
    runs = manager(tmp_path, scenario_dir, "ok")
    evaluations = RunEvaluations(runs, command=evaluator())
    with pytest.raises(UnknownRun):
        evaluations.start("sensors-nope")
    with pytest.raises(UnknownRun):
        evaluations.get("../etc")
    run_id = finished(runs)
    with pytest.raises(UnknownEvaluation, match="not been evaluated"):
        evaluations.get(run_id)
    other = finished(runs, "other")
    with pytest.raises(NotEvaluable, match="'other' has nothing to score"):
        evaluations.start(other)


def test_the_command_passes_the_runs_own_files() -> None:
    spec = EvaluationSpec(
        "vehicles",
        "cv-9f-",
        Path("/r/evaluation-report.json"),
        Path("/r/stack.yaml"),
        Path("/r/pipeline.yaml"),
    )
    assert evaluate_command(spec)[3:] == [
        "evaluate", "vehicles", "--run", "cv-9f-", "--out", "/r/evaluation-report.json",
        "--config", "/r/stack.yaml", "--pipeline", "/r/pipeline.yaml",
    ]  # fmt: skip


# -- the routes ------------------------------------------------------------------------------


@pytest.fixture
def api(tmp_path: Path, scenario_dir: Path) -> Iterator[tuple[TestClient, RunManager]]:
    runs = manager(tmp_path, scenario_dir, "ok")
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", TOKEN),
        publisher=MemoryPublisher(),
    )
    app = create_app(service, run_manager=runs)
    with TestClient(app) as client:
        app.state.evaluations = RunEvaluations(runs, command=evaluator())
        yield client, runs


def test_routes_score_a_run_and_list_it_for_the_comparison(
    api: tuple[TestClient, RunManager],
) -> None:
    client, runs = api
    run_id = finished(runs, overrides={"entities": 50})
    path = f"/v1/control/runs/{run_id}/evaluation"
    assert client.post(path).status_code == 401
    assert client.get(f"/v1/runs/{run_id}/evaluation").status_code == 404
    started = client.post(path, headers=AUTH)
    assert started.status_code == 202, started.text
    RunEvaluation.model_validate(started.json())

    def done() -> bool:
        return bool(client.get(f"/v1/runs/{run_id}/evaluation").json()["status"] == "done")

    wait_for(done)
    private = client.get(f"/v1/runs/{run_id}/evaluation", headers=AUTH).json()
    assert private["report"]["paths"] == REPORT["paths"]
    assert private["knobs"]["overrides"] == {"entities": 50}
    public = RunEvaluationList.model_validate(client.get("/v1/evaluations/runs").json())
    (listed,) = public.evaluations
    assert listed.run_id == run_id and listed.knobs.overrides is None  # only with the token
    assert client.get("/v1/evaluations/runs", headers=AUTH).json()["evaluations"][0]["knobs"][
        "overrides"
    ] == {"entities": 50}


def test_routes_refuse_what_cannot_be_scored(api: tuple[TestClient, RunManager]) -> None:
    client, runs = api
    missing = client.post("/v1/control/runs/sensors-20260101-000000-abcdef/evaluation",
                          headers=AUTH)  # fmt: skip
    assert missing.status_code == 404 and "no run" in missing.json()["detail"]
    malformed = client.post("/v1/control/runs/-bad%20id/evaluation", headers=AUTH)
    assert malformed.status_code == 422
    assert malformed.json()["detail"][0]["loc"] == ["path", "run_id"]
    other = finished(runs, "other")
    refused = client.post(f"/v1/control/runs/{other}/evaluation", headers=AUTH)
    assert refused.status_code == 422
    assert "nothing to score" in refused.json()["detail"][0]["msg"]
    assert refused.json()["detail"][0]["loc"] == ["path", "run_id"]


def test_routes_answer_409_while_one_is_under_way(api: tuple[TestClient, RunManager]) -> None:
    client, runs = api
    slow = RunEvaluations(runs, command=evaluator(seconds=2.0))
    client.app.state.evaluations = slow  # type: ignore[attr-defined]
    run_id = finished(runs)
    path = f"/v1/control/runs/{run_id}/evaluation"
    assert client.post(path, headers=AUTH).status_code == 202
    busy = client.post(path, headers=AUTH)
    assert busy.status_code == 409 and busy.json()["detail"]["run_id"] == run_id
    assert "being evaluated" in busy.json()["detail"]["message"]
