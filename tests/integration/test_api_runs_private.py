"""`GET /v1/runs` on the real server shows a run's stderr tail, working directory and overrides
only to the control token (issue 13).

`streamsim api` (uvicorn) starts with a control token and a broker nobody listens on; a run it
starts (`streamsim simulate` into that Kafka) fails after its connection timeout with an error
on stderr. Then each view of the run is read without a token, with a wrong one, and with the
right one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port
from tests.integration.test_api_endpoint import API_TOKEN, Server

pytestmark = pytest.mark.integration

OVERRIDES = {"entities": 7, "seed": 11}
PRIVATE = ("error", "workdir", "overrides")
AUTH = {"Authorization": f"Bearer {API_TOKEN}"}


def _runs(server: Server, path: str, token: str | None) -> tuple[dict[str, Any], str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = server.http.get(path, headers=headers)
    assert response.status_code == 200, response.text
    body = response.json()
    (run,) = body.get("runs", [body])
    return run, response.text


def test_runs_show_private_fields_only_with_the_token(tmp_path: Path) -> None:
    data = tmp_path / "data"
    stack_file = tmp_path / "stack.yaml"
    stack_file.write_text(
        f"kafka:\n  bootstrap: 127.0.0.1:{free_port()}\n"  # nothing listens there
        f"dirs:\n  data: {data}\n"
        f"api:\n  port: {free_port()}\n"
    )
    settings_file = tmp_path / "api.yaml"
    settings_file.write_text("kind: api\nrebuild_timeout_s: 1\nflush_timeout_s: 1\n")
    server = Server(stack_file, settings_file, tmp_path / "server.log", "starting")
    try:
        # The whole scenario needs its job's input offsets: a 503 (the API gives the cluster a
        # few seconds; the client waits generously), nothing started.
        unavailable = server.http.post(
            "/v1/control/runs",
            json={"scenario": "sensors", "duration_s": 30},
            headers=AUTH,
            timeout=120,
        )
        assert unavailable.status_code == 503, unavailable.text
        assert "does not answer" in unavailable.text
        assert server.http.get("/v1/runs", headers=AUTH).json()["runs"] == []
        started = server.http.post(
            "/v1/control/runs",
            json={
                "scenario": "sensors",
                "duration_s": 30,
                "overrides": OVERRIDES,
                "components": ["simulator"],  # the run this test judges: one that fails
            },
            headers=AUTH,
        )
        assert started.status_code == 201, started.text
        run_id = started.json()["run_id"]
        deadline = time.monotonic() + 120
        while (status := _runs(server, f"/v1/runs/{run_id}", API_TOKEN)[0]["status"]) in (
            "starting",
            "running",
        ):
            assert time.monotonic() < deadline, "the run did not end"
            time.sleep(1)
        assert status == "failed"

        for path in ("/v1/runs", f"/v1/runs/{run_id}"):
            full, _ = _runs(server, path, API_TOKEN)
            assert "does not answer" in full["error"], full["error"]
            assert full["workdir"] == str(data / "runs" / run_id)
            assert full["overrides"] == OVERRIDES
            for token in (None, "not-the-token"):
                shown, text = _runs(server, path, token)
                assert shown["run_id"] == run_id and shown["status"] == "failed"
                assert {k: shown[k] for k in PRIVATE} == dict.fromkeys(PRIVATE), (path, token)
                assert "does not answer" not in text and str(tmp_path) not in text
                assert '"entities":7' not in text.replace(" ", "")
    finally:
        server.stop()
