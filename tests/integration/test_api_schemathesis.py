"""schemathesis against `streamsim api` as users run it (real uvicorn, the session broker):
every operation of `/openapi.json`, `--checks all`, with and without the control token.

Done when both runs report 0 failures: no 5xx, every response matching its documented status
and schema, negative data rejected, auth enforced. `schemathesis.toml` beside this file says
which 422s the schema cannot predict (Luhn, card numbers in ids, scenario overrides).
Sized for CI: a few hundred requests per run, well under a minute each on a laptop.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from core.config import StackConfig
from tests.conftest import REPO_ROOT, STREAMSIM, free_port

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent
SCHEMATHESIS = str(Path(sys.executable).parent / "schemathesis")
TOKEN = "schemathesis-control-token"
MAX_EXAMPLES = int(os.environ.get("STREAMSIM_SCHEMATHESIS_EXAMPLES", "15"))


@pytest.fixture(scope="module")
def api_url(kafka_stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("schemathesis")
    # The run routes read `config/scenarios` of the working directory: one small scenario
    # whose name the fuzzer will not guess, so no run actually starts.
    (work / "config" / "scenarios").mkdir(parents=True)
    shutil.copy(
        REPO_ROOT / "config" / "scenarios" / "sensors.yaml",
        work / "config" / "scenarios" / "st-only-by-name.yaml",
    )
    # Likewise the load-test routes read `config/loadtests`: one file the fuzzer will not guess.
    (work / "config" / "loadtests").mkdir()
    shutil.copy(
        REPO_ROOT / "config" / "loadtests" / "fraud_endpoint.yaml",
        work / "config" / "loadtests" / "st-only-by-name.yaml",
    )
    port = free_port()
    stack_file = work / "stack.yaml"
    stack_file.write_text(
        f"kafka:\n  bootstrap: {kafka_stack.kafka.bootstrap_servers}\n"
        f"dirs:\n  data: {work / 'data'}\n"
        f"api:\n  port: {port}\n"
    )
    settings_file = work / "api.yaml"
    settings_file.write_text(
        f"kind: api\ntopic: cards.activity-st-{uuid.uuid4().hex[:8]}\nrebuild_timeout_s: 30\n"
    )
    log = work / "server.log"
    env = {**os.environ, "STREAMSIM_API_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"}
    cmd = [STREAMSIM, "api", "--config", str(stack_file), "--settings", str(settings_file)]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=work)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"server exited: {log.read_text()}"
            try:
                if httpx.get(f"{url}/v1/health", timeout=5).json()["state"]["status"] == "live":
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"server not live: {log.read_text()}"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "Traceback" not in log.read_text(), log.read_text()


@pytest.mark.parametrize("with_token", [True, False], ids=["token", "no-token"])
def test_schemathesis_finds_nothing(api_url: str, with_token: bool) -> None:
    cmd = [
        SCHEMATHESIS,
        "--config-file",
        str(HERE / "schemathesis.toml"),
        "run",
        f"{api_url}/openapi.json",
        "--checks",
        "all",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        "13",
        "--workers",
        "1",
        "--request-timeout",
        "10",
        "--no-color",
    ]
    if with_token:
        cmd += ["--header", f"Authorization: Bearer {TOKEN}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=HERE)
    out = done.stdout + done.stderr
    print(out[out.rfind("SUMMARY") :])  # with -s: what ran
    assert done.returncode == 0, out
    selected = re.search(r"Selected: (\d+)/(\d+)", out)
    tested = re.search(r"Tested: (\d+)", out)
    assert selected and tested, out
    assert selected[1] == selected[2] == tested[1], out  # every operation was tried
