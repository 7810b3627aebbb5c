"""`streamsim api` started as a user would, for the panel's run-control tests; `stop_runs` for
a test module that shares one server between its tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import yaml

from tests.conftest import STREAMSIM

#: How long stopping a run may take (its Spark job's JVM included).
STOP_S = 180


@contextmanager
def panel_api(
    workdir: Path, stack: dict[str, object], activity_topic: str, token: str, timeout_s: float
) -> Iterator[tuple[httpx.Client, Path]]:
    """The API on `stack` (its `api.port` set here), run in `workdir` (its scenario files
    under `config/scenarios/`) with control token `token`; an HTTP client with `timeout_s`,
    and the server's log. Stopped with Ctrl-C, killed if it does not stop."""
    from tests.conftest import free_port

    port = free_port()
    stack_file = workdir / "stack.yaml"
    stack_file.write_text(yaml.safe_dump({**stack, "api": {"port": port}}))
    settings_file = workdir / "api.yaml"
    settings_file.write_text(f"kind: api\ntopic: {activity_topic}\n")
    env = {**os.environ, "STREAMSIM_API_TOKEN": token, "PYTHONUNBUFFERED": "1"}
    env["STREAMSIM_PAN_SECRET"] = "it-panel-pan-secret-0123456789"
    log = workdir / "api.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [STREAMSIM, "api", "--config", str(stack_file), "--settings", str(settings_file),
             "--no-access-log"],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=workdir,
        )  # fmt: skip
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=timeout_s)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"the server exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"the server is not up:\n{log.read_text()}"
            try:
                if http.get("/v1/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        yield http, log
    finally:
        http.close()
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stop_runs(http: httpx.Client, token: str) -> None:
    """Stop the server's runs still going: one left behind would keep producing into the
    broker, and hold its scenario (one run per scenario at a time) from the next test."""
    with contextlib.suppress(httpx.HTTPError):
        for run in http.get("/v1/runs").json()["runs"]:
            if run["status"] in ("running", "stopping"):
                http.delete(
                    f"/v1/control/runs/{run['run_id']}",
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=STOP_S,
                )
