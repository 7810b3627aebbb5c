"""One run = the whole scenario, through the real server: `streamsim api` (uvicorn) on the
session's broker starts a sensors run with all its components, the simulator and the real
`sensors` Spark job (a `streamsim pipeline run` child with its JVM). Once the run's page
shows a batch of the job (its metrics, read back from the `metrics` topic), DELETE stops the
run: every component is `stopped` and no process of the run is left, neither the children nor
anything in their process groups (the JVM included).

A card run in POS mode, asked for its simulator and endpoint only, starts a real `streamsim
api` on a port of its own that the simulator posts to, and stops the simulator before it.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import yaml

from core.config import StackConfig
from tests.conftest import REPO_ROOT
from tests.integration.panel_api import panel_api, stop_runs

pytestmark = pytest.mark.integration

TOKEN = "it-run-components-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JOB_TIMEOUT_S = 300


Api = tuple[httpx.Client, str, Path]


@pytest.fixture(scope="module")
def module_api(kafka_stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """`streamsim api` with a control token and two scenario files on fresh topics under fresh
    names: a small sensor fleet (`<name>`) and a small card scenario (`cards_<name>`). One for
    the module: each test starts runs of its own scenario and judges them by run id."""
    tmp_path = tmp_path_factory.mktemp("components")
    suffix = uuid.uuid4().hex[:8]
    scenario = f"it_components_{suffix}"
    folder = tmp_path / "config" / "scenarios"
    folder.mkdir(parents=True)
    for name, source, entities in [
        (scenario, "sensors", 300),
        (f"cards_{scenario}", "cards", 2000),
    ]:
        data = yaml.safe_load((REPO_ROOT / f"config/scenarios/{source}.yaml").read_text())
        data.update(name=name, entities=entities, duration_s=86_400)
        data["domain"]["topic"] = f"{data['domain']['topic']}-it-{suffix}"
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(data))
    stack = {
        "kafka": {"bootstrap": kafka_stack.kafka.bootstrap_servers},
        "spark": {"shuffle_partitions": 2},
        "dirs": {"cache": str(REPO_ROOT / ".cache"), "data": str(tmp_path / "data")},
    }
    activity = f"cards.activity-it-{suffix}"
    with panel_api(tmp_path, stack, activity, TOKEN, 180) as (http, log):
        yield http, scenario, log


@pytest.fixture
def api(module_api: Api) -> Iterator[Api]:
    """The module's API; the runs a test leaves going are stopped after it."""
    yield module_api
    stop_runs(module_api[0], TOKEN)


def checkpointed(run: dict[str, Any], query: dict[str, Any]) -> bool:
    """Whether the query's reported batch is in the run's own checkpoints (Spark logs a batch's
    offsets there before running it): the report is of this run's job, not another's."""
    job, _, name = query["query"].partition(".")
    return (
        Path(run["workdir"]) / "checkpoints" / job / name / "offsets" / str(query["batch_id"])
    ).is_file()


def processes_of(groups: set[int]) -> list[psutil.Process]:
    """Live processes in any of `groups`."""
    alive = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) in groups and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except (psutil.Error, ProcessLookupError):
            continue
    return alive


def test_a_run_starts_and_stops_its_simulator_and_spark_job(api: Api) -> None:
    http, scenario, log = api
    started = http.post(
        "/v1/control/runs", json={"scenario": scenario, "speed": 60.0}, headers=AUTH
    )
    assert started.status_code == 201, started.text
    run: dict[str, Any] = started.json()
    run_id = run["run_id"]
    assert run["job"] == "sensors"
    assert [c["name"] for c in run["components"]] == ["job", "simulator"]
    try:
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while True:
            run = http.get(f"/v1/runs/{run_id}", headers=AUTH).json()
            states = {c["name"]: c for c in run["components"]}
            assert run["status"] == "running", run
            progress = states["job"]["progress"] or []
            if any((q.get("input_rows") or 0) > 0 for q in progress):
                break
            assert time.monotonic() < deadline, f"no batch of the job:\n{run}\n{log.read_text()}"
            time.sleep(1.0)
        assert states["job"]["state"] == "running" and states["simulator"]["state"] == "running"
        query = next(q for q in progress if q["input_rows"])
        assert query["job"] == "sensors" and checkpointed(run, query), (query, run)
        # Every process the run started: the children, their groups, the job's JVM.
        groups = {c["pid"] for c in run["components"]}
        job = psutil.Process(states["job"]["pid"])
        descendants = {p.pid for p in job.children(recursive=True)}
        assert any("java" in " ".join(p.cmdline()) for p in job.children(recursive=True))
        assert len(processes_of(groups)) >= 3  # simulator, job driver, JVM
        # Without the token: states and progress, no logs.
        public = http.get(f"/v1/runs/{run_id}").json()
        assert all(c["log_tail"] is None and c["log"] is None for c in public["components"])
        assert public["components"][0]["progress"]
    finally:
        stopped = http.delete(f"/v1/control/runs/{run_id}", headers=AUTH)
    assert stopped.status_code == 200, stopped.text
    body = stopped.json()
    assert body["status"] == "stopped", body
    assert {c["name"]: c["state"] for c in body["components"]} == {
        "job": "stopped",
        "simulator": "stopped",
    }
    assert processes_of(groups) == []
    assert [pid for pid in descendants if alive(pid)] == []


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_pos_run_starts_its_endpoint_and_stops_it_after_the_simulator(api: Api) -> None:
    http, scenario, log = api
    started = http.post(
        "/v1/control/runs",
        json={
            "scenario": f"cards_{scenario}",
            "speed": 60.0,
            "overrides": {"domain": {"delivery": "http"}},
            "components": ["simulator", "endpoint"],
        },
        headers=AUTH,
    )
    assert started.status_code == 201, started.text
    run: dict[str, Any] = started.json()
    run_id = run["run_id"]
    assert run["job"] is None
    assert [c["name"] for c in run["components"]] == ["endpoint", "simulator"]
    try:
        deadline = time.monotonic() + 120
        while True:
            run = http.get(f"/v1/runs/{run_id}", headers=AUTH).json()
            assert run["status"] == "running", run
            states = {c["name"]: c for c in run["components"]}
            url = states["endpoint"]["url"]
            if states["simulator"]["state"] == "running":
                stats = httpx.get(f"{url}/v1/stats", timeout=10).json()
                if stats["requests"] > 0:
                    break
            assert time.monotonic() < deadline, f"none reached {url}:\n{run}\n{log.read_text()}"
            time.sleep(1.0)
        assert url.startswith("http://127.0.0.1:") and url != str(http.base_url).rstrip("/")
        groups = {c["pid"] for c in run["components"]}
        assert len(processes_of(groups)) >= 2
    finally:
        stopped = http.delete(f"/v1/control/runs/{run_id}", headers=AUTH)
    assert stopped.status_code == 200, stopped.text
    body = stopped.json()
    assert body["status"] == "stopped", body
    ends = {c["name"]: c for c in body["components"]}
    assert {name: c["state"] for name, c in ends.items()} == {
        "endpoint": "stopped",
        "simulator": "stopped",
    }
    assert ends["simulator"]["ended_at"] <= ends["endpoint"]["ended_at"]
    # A clean stop: uvicorn shuts down, then re-raises the SIGTERM it caught (exit -15).
    assert ends["endpoint"]["exit_code"] == -signal.SIGTERM
    assert "Application shutdown complete" in ends["endpoint"]["log_tail"]
    assert processes_of(groups) == []
