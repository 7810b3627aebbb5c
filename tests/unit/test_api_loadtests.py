"""Load tests from the panel API: the allow-list, the model's verdict, listing earlier
reports, and a run's life cycle with a fake `streamsim loadtest` child."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from fastapi.testclient import TestClient

from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from api.main import create_app
from api.panel.models.loadtests import LoadTestFiles, LoadTestInfo, LoadTestList
from runs.loadtests import (
    PROGRESS_FILE,
    LoadTestManager,
    check_command,
    config_problems,
    editable,
)
from tests.conftest import REPO_ROOT

TOKEN = "ctl-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LOADTESTS = REPO_ROOT / "config" / "loadtests"

#: A stand-in for `streamsim loadtest FILE --out DIR --progress P`: live figures, then (unless
#: told to hang) a report and a chart, exit 0.
FAKE = r"""
import json, pathlib, sys, time
file, out, progress, mode = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3], sys.argv[4]
out.mkdir(parents=True, exist_ok=True)
live = {"phase": "measured", "elapsed_s": 1.0, "sent": 5, "finished": 5, "total": 10,
        "achieved_rate": 5.0, "good": 5, "errors": 0,
        "latency_ms": {"p50": 1.0, "p95": 2.0, "p99": 3.0, "max": 4.0}}
pathlib.Path(progress).write_text(json.dumps(live))
if mode == "hang":
    time.sleep(60)
if mode == "fail":
    sys.stderr.write("cannot connect to the endpoint\n")
    sys.exit(1)
report = {"requests": 10, "errors": 0, "achieved_rate": 5.0, "intended_rate": 5.0,
          "latency_ms": {"p50": 1.0, "p90": 2.0, "p99": 3.0, "p999": 4.0, "max": 4.0},
          "slo": {}, "ok": True, "name": "x", "started_at": "2026-01-01T00:00:00+00:00"}
(out / "report.json").write_text(json.dumps(report))
(out / "latency_percentiles.vl.json").write_text(json.dumps({"mark": "line"}))
"""


def fake_command(mode: str):  # type: ignore[no-untyped-def]
    def command(file: Path, stack_file: Path | None, folder: Path) -> list[str]:
        return [sys.executable, "-c", FAKE, str(file), str(folder), str(folder / PROGRESS_FILE),
                mode]  # fmt: skip

    return command


def client_with(manager: LoadTestManager) -> TestClient:
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", TOKEN),
        publisher=MemoryPublisher(),
    )
    return TestClient(create_app(service, loadtests=manager))


@pytest.fixture
def files(tmp_path: Path) -> Path:
    folder = tmp_path / "loadtests"
    folder.mkdir()
    for name in ("fraud_endpoint.yaml", "pos_network.yaml"):
        shutil.copy(LOADTESTS / name, folder / name)
    return folder


def manager(tmp_path: Path, files: Path, mode: str = "report", **kwargs: object) -> LoadTestManager:
    return LoadTestManager(
        tmp_path / "data" / "loadtests",
        loadtest_dir=files,
        command=fake_command(mode),
        cwd=REPO_ROOT,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture
def api(tmp_path: Path, files: Path) -> Iterator[tuple[TestClient, LoadTestManager]]:
    lt = manager(tmp_path, files)
    with client_with(lt) as client:
        yield client, lt


# -- pure parts ------------------------------------------------------------------------------


def test_editable_is_the_rate_shape_durations_and_slos() -> None:
    data = {"target": {"type": "http", "url": "http://x:1"}, "load": {"rate": 1}, "slo": {},
            "duration_s": 5, "payload": {"cards": 3}}  # fmt: skip
    assert editable(data) == {"load": {"rate": 1}, "slo": {}, "duration_s": 5}


def test_editable_of_a_scenario_target_is_each_paths_load_and_slo() -> None:
    data = {"warmup_s": 1, "target": {"type": "scenario",
            "http": {"target": {"url": "http://x:1"}, "load": {"rate": 1}, "slo": {"p99_ms": 2}},
            "kafka": {"target": {"topic": "t"}, "load": {"rate": 3}}}}  # fmt: skip
    assert editable(data) == {
        "warmup_s": 1,
        "target": {
            "http": {"load": {"rate": 1}, "slo": {"p99_ms": 2}},
            "kafka": {"load": {"rate": 3}},
        },
    }


def test_config_problems_name_each_key(tmp_path: Path) -> None:
    path = tmp_path / "loadtest.yaml"
    message = (
        f"error: {path}: key 'load.rate' has bad value -5: Input should be greater than 0; "
        "key 'slo.bogus' is not a known setting (check its spelling)\n"
    )
    problems = config_problems(message, path)
    assert [p["loc"] for p in problems] == [["load", "rate"], ["slo", "bogus"]]
    assert problems[0]["msg"].startswith("key 'load.rate' has bad value -5")
    assert str(tmp_path) not in " ".join(p["msg"] for p in problems)


# -- routes ----------------------------------------------------------------------------------


def test_files_list_each_file_and_the_tunable_keys(api: tuple[TestClient, LoadTestManager]) -> None:
    client, _ = api
    body = client.get("/v1/loadtests/files").json()
    LoadTestFiles.model_validate(body)
    by_name = {f["name"]: f for f in body["files"]}
    assert by_name["fraud_endpoint"]["target"] == "http"
    assert by_name["fraud_endpoint"]["editable"]["load"] == {"type": "constant", "rate": 1000}
    assert by_name["pos_network"]["target"] == "scenario"
    assert "target.http.slo" in body["tunable"] and "slo" in body["tunable"]


def test_starting_needs_the_token(api: tuple[TestClient, LoadTestManager]) -> None:
    client, _ = api
    assert client.post("/v1/control/loadtests", json={"file": "fraud_endpoint"}).status_code == 401


@pytest.mark.parametrize(
    ("edits", "key"),
    [
        ({"target": {"url": "http://evil:80"}}, "target.url"),
        ({"target": {"http": {"target": {"url": "http://evil:80"}}}}, "target.http.target.url"),
        ({"payload": {"cards": 5}}, "payload.cards"),
        ({"client": {"connections": 9000}}, "client.connections"),
        ({"name": "other"}, "name"),
        ({"duration_s": 86_400}, "duration_s"),
    ],
)
def test_edits_off_the_allow_list_get_a_422_naming_the_key(
    api: tuple[TestClient, LoadTestManager], edits: dict[str, object], key: str
) -> None:
    client, lt = api
    response = client.post(
        "/v1/control/loadtests", json={"file": "fraud_endpoint", "edits": edits}, headers=AUTH
    )
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert any(f"'{key}'" in item["msg"] for item in detail), detail
    assert lt.list() == []  # nothing started, no folder left


def test_a_bad_value_gets_the_models_422_naming_the_key(tmp_path: Path, files: Path) -> None:
    lt = manager(tmp_path, files, check=check_command)  # the real `streamsim config check`
    with client_with(lt) as client:
        response = client.post(
            "/v1/control/loadtests",
            json={"file": "fraud_endpoint", "edits": {"load": {"rate": -5}, "slo": {"p98_ms": 1}}},
            headers=AUTH,
        )
    assert response.status_code == 422, response.text
    locs = [item["loc"] for item in response.json()["detail"]]
    assert ["body", "edits", "load", "rate"] in locs and ["body", "edits", "slo", "p98_ms"] in locs
    assert lt.list() == []


def test_unknown_file_is_a_404(api: tuple[TestClient, LoadTestManager]) -> None:
    client, _ = api
    response = client.post("/v1/control/loadtests", json={"file": "nope"}, headers=AUTH)
    assert response.status_code == 404
    assert "fraud_endpoint" in response.json()["detail"]


def test_a_run_shows_live_figures_then_its_report_and_charts(tmp_path: Path, files: Path) -> None:
    lt = manager(tmp_path, files, check=lambda p: [sys.executable, "-c", "pass"])
    edits = {"load": {"type": "step", "steps": [{"at_s": 0, "rate": 5}]}, "duration_s": 2}
    with client_with(lt) as client:
        started = client.post(
            "/v1/control/loadtests", json={"file": "fraud_endpoint", "edits": edits}, headers=AUTH
        )
        assert started.status_code == 201, started.text
        run = LoadTestInfo.model_validate(started.json())
        assert run.status == "running" and run.edits == edits
        assert lt.get(run.run_id).done.wait(180)
        body = client.get(f"/v1/loadtests/runs/{run.run_id}").json()
        LoadTestInfo.model_validate(body)
        assert body["status"] == "finished"
        assert body["progress"]["achieved_rate"] == 5.0
        assert body["summary"]["ok"] is True
        assert [c["name"] for c in body["charts"]] == ["latency_percentiles"]
        merged = (lt.reports_dir / run.run_id / "loadtest.yaml").read_text()
        assert "type: step" in merged and "payload:" in merged  # the file's rest kept
    # A new API (a restart) still lists it, from its folder, next to a CLI run's report.
    cli_run = lt.reports_dir / "endpoint_2000-20260101T000000Z"
    cli_run.mkdir()
    (cli_run / "report.json").write_bytes(
        orjson.dumps({"name": "endpoint_2000", "ok": False, "started_at": "2026-01-01T00:00:00"})
    )
    with client_with(manager(tmp_path, files)) as client:
        listed = client.get("/v1/loadtests/runs").json()
        LoadTestList.model_validate(listed)
        ids = [r["run_id"] for r in listed["runs"]]
        assert ids == [run.run_id, cli_run.name]  # newest first
        assert listed["runs"][1]["file"] is None and listed["runs"][1]["summary"]["ok"] is False


def test_one_at_a_time_and_stop(tmp_path: Path, files: Path) -> None:
    lt = manager(tmp_path, files, "hang", check=lambda p: [sys.executable, "-c", "pass"])
    with client_with(lt) as client:
        first = client.post(
            "/v1/control/loadtests", json={"file": "fraud_endpoint"}, headers=AUTH
        ).json()
        second = client.post("/v1/control/loadtests", json={"file": "pos_network"}, headers=AUTH)
        assert second.status_code == 409
        assert second.json()["detail"]["run_id"] == first["run_id"]
        assert client.delete(f"/v1/control/loadtests/{first['run_id']}").status_code == 401
        stopped = client.delete(f"/v1/control/loadtests/{first['run_id']}", headers=AUTH)
        assert stopped.status_code == 200 and stopped.json()["status"] == "stopped"
        again = client.post("/v1/control/loadtests", json={"file": "pos_network"}, headers=AUTH)
        assert again.status_code == 201
        client.delete(f"/v1/control/loadtests/{again.json()['run_id']}", headers=AUTH)


def test_a_run_without_a_report_failed_with_its_stderr_for_the_token_only(
    tmp_path: Path, files: Path
) -> None:
    lt = manager(tmp_path, files, "fail", check=lambda p: [sys.executable, "-c", "pass"])
    with client_with(lt) as client:
        run_id = client.post(
            "/v1/control/loadtests", json={"file": "fraud_endpoint"}, headers=AUTH
        ).json()["run_id"]
        assert lt.get(run_id).done.wait(180)
        open_view = client.get(f"/v1/loadtests/runs/{run_id}").json()
        private = client.get(f"/v1/loadtests/runs/{run_id}", headers=AUTH).json()
    assert open_view["status"] == "failed" and open_view["error"] is None
    assert "cannot connect" in private["error"]


def test_unknown_run_is_a_404(api: tuple[TestClient, LoadTestManager]) -> None:
    client, _ = api
    assert client.get("/v1/loadtests/runs/nope").status_code == 404
    assert client.get("/v1/loadtests/runs/..").status_code == 404
