"""Run control's override allow-list through the real server: `streamsim api` (uvicorn) on the
session's broker, its scenario files in its working directory's `config/scenarios/`.

A key off the allow-list (the topic, the run id, the name, 10 million entities) gets a 422
naming it and starts nothing; allowed keys start a real `streamsim simulate` run into Kafka
that finishes with the overrides applied. Without the token, the runs list hides them. A rate
cap lifted by PATCH while the run goes on takes effect in the running simulator.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from core.config import StackConfig
from core.kafka import ensure_topics
from core.kafka.offsets import end_offsets, records_since
from tests.conftest import REPO_ROOT
from tests.integration.panel_api import panel_api, stop_runs

pytestmark = pytest.mark.integration

TOKEN = "it-panel-control-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: Deadlines: for a run's first readings, for a run to end (generous: a loaded machine).
WAIT_S = 60
RUN_S = 300


@dataclass
class Api:
    http: httpx.Client
    scenario: str
    topic: str
    log: Path


@pytest.fixture(scope="module")
def module_api(kafka_stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """`streamsim api` with a control token, serving one scenario file of its own: the sensor
    fleet on a fresh topic, under a fresh name (so its truth topic is fresh too). One for the
    module: each test judges its own runs, by id."""
    tmp_path = tmp_path_factory.mktemp("overrides")
    suffix = uuid.uuid4().hex[:8]
    scenario, topic = f"it_overrides_{suffix}", f"sensors.readings-it-{suffix}"
    data = yaml.safe_load((REPO_ROOT / "config/scenarios/sensors.yaml").read_text())
    data["name"] = scenario
    data["domain"]["topic"] = topic
    folder = tmp_path / "config" / "scenarios"
    folder.mkdir(parents=True)
    (folder / f"{scenario}.yaml").write_text(yaml.safe_dump(data))
    stack: dict[str, object] = {
        "kafka": {"bootstrap": kafka_stack.kafka.bootstrap_servers},
        "dirs": {"data": str(tmp_path / "data")},
    }
    with panel_api(tmp_path, stack, f"cards.activity-it-{suffix}", TOKEN, 30) as (http, log):
        yield Api(http, scenario, topic, log)


@pytest.fixture
def api(module_api: Api) -> Iterator[Api]:
    """The module's API; the run a test leaves going is stopped after it (one run of the
    scenario at a time)."""
    yield module_api
    stop_runs(module_api.http, TOKEN)


def run_ids(api: Api) -> list[str]:
    return [r["run_id"] for r in api.http.get("/v1/runs", headers=AUTH).json()["runs"]]


def start(api: Api, overrides: dict[str, Any], **more: Any) -> httpx.Response:
    """A run of the simulator only: these tests are about its overrides and pacing (a run
    also starts the scenario's Spark job by default)."""
    body = {"scenario": api.scenario, "overrides": overrides, "components": ["simulator"], **more}
    return api.http.post("/v1/control/runs", json=body, headers=AUTH)


def wait_ended(api: Api, run_id: str, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        run: dict[str, Any] = api.http.get(f"/v1/runs/{run_id}", headers=AUTH).json()
        if run["status"] not in ("running", "stopping"):
            return run
        assert time.monotonic() < deadline, f"run still {run['status']}:\n{api.log.read_text()}"
        time.sleep(0.25)


@pytest.mark.parametrize(
    ("overrides", "loc"),
    [
        ({"domain": {"topic": "alerts"}}, ["domain", "topic"]),
        ({"domain": {"endpoint": {"url": "http://evil.example/"}}}, ["domain", "endpoint", "url"]),
        ({"name": "cards"}, ["name"]),
        ({"run_id": "someone-elses"}, ["run_id"]),
        ({"entities": 10_000_000}, ["entities"]),
    ],
)
def test_a_forbidden_key_gets_a_422_naming_it(
    api: Api, overrides: dict[str, Any], loc: list[str]
) -> None:
    before = run_ids(api)
    response = start(api, overrides, speed="max", duration_s=10)
    assert response.status_code == 422, response.text
    (item,) = response.json()["detail"]
    assert item["loc"] == ["body", "overrides", *loc]
    assert f"'{'.'.join(loc)}'" in item["msg"]
    assert run_ids(api) == before  # nothing started


def test_allowed_keys_start_a_run_that_applies_them(api: Api) -> None:
    (listed,) = [
        s for s in api.http.get("/v1/scenarios").json()["scenarios"] if s["name"] == api.scenario
    ]
    overrides = {
        "entities": 20,
        "delivery": {"duplicates": {"probability": 0.2}},
        "domain": {"faults": {"rate_per_hour": 2.0, "mix": {"spike": 1.0}}},
        "classes": {"env_sensor": {"delivery": {"drops": {"probability": 0.0}}}},
    }
    assert {"entities", "delivery.duplicates.probability", "domain.faults.mix.spike"} <= set(
        listed["tunable"]
    )
    response = start(api, overrides, speed="max", duration_s=60)
    assert response.status_code == 201, response.text
    run_id = response.json()["run_id"]
    run = wait_ended(api, run_id, RUN_S)
    assert run["status"] == "finished", run["error"]
    summary = run["summary"]
    # 20 sensors reporting every 4 to 12 s for 60 s: a few hundred readings, a fifth resent.
    assert 100 <= summary["events"] <= 1000 and summary["duplicates"] >= 10, summary
    written = yaml.safe_load((Path(run["workdir"]) / "scenario.yaml").read_text())
    assert written["entities"] == 20 and written["domain"]["topic"] == api.topic
    assert written["run_id"] == run_id and written["name"] == api.scenario
    # Without the token the list hides the overrides, the working directory and errors.
    (public,) = [r for r in api.http.get("/v1/runs").json()["runs"] if r["run_id"] == run_id]
    assert public["status"] == "finished"
    assert (public["overrides"], public["workdir"], public["error"]) == (None, None, None)
    listed = api.http.get("/v1/runs", headers=AUTH).json()["runs"]
    (private,) = [r for r in listed if r["run_id"] == run_id]
    assert private["overrides"] == overrides


def test_the_rate_cap_is_lifted_while_the_run_goes_on(kafka_stack: StackConfig, api: Api) -> None:
    # About 1,700 readings capped at 20 events/s would take 85 s: the cap goes once the first
    # readings are in the topic (the module's runs write there: counted from its end now).
    overrides = {"entities": 20, "pacing": {"max_rate": 20}}
    ensure_topics(kafka_stack, [api.topic])
    before = end_offsets(kafka_stack, api.topic)
    response = start(api, overrides, speed="max", duration_s=600)
    assert response.status_code == 201, response.text
    run_id = response.json()["run_id"]
    deadline = time.monotonic() + WAIT_S
    while (capped := records_since(kafka_stack, api.topic, before)) == 0:
        assert api.http.get(f"/v1/runs/{run_id}").json()["status"] == "running"
        assert time.monotonic() < deadline, f"no reading sent:\n{api.log.read_text()}"
        time.sleep(0.25)
    url = f"/v1/control/runs/{run_id}/pacing"
    patched = api.http.patch(url, json={"max_rate": None}, headers=AUTH)
    assert patched.status_code == 200, patched.text  # the run was still going, capped
    assert patched.json()["live"] == {"max_rate": None}
    run = wait_ended(api, run_id, RUN_S)
    assert run["status"] == "finished", run["error"]
    summary = run["summary"]
    # The running simulator took the lifted cap (its one retune) and sent the rest after it.
    assert [r["max_rate"] for r in summary["retunes"]] == [None]
    assert summary["events"] > 1000 and capped < summary["events"], (capped, summary)
