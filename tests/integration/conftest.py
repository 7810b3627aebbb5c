"""Fixtures the integration tests share beyond one module: started at most once per pytest
worker (`make test` runs two), on that worker's broker."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from core.config import StackConfig
from tests.conftest import REPO_ROOT, STREAMSIM, free_port


@pytest.fixture(scope="session")
def endpoint(kafka_stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`streamsim api` on a free port, publishing to a fresh topic on the session broker: the
    load tests' endpoint, shared (each reads only its own report, never the topic)."""
    tmp = tmp_path_factory.mktemp("loadtest-api")
    port = free_port()
    stack_file = tmp / "stack.yaml"
    stack_file.write_text(
        f"kafka:\n  bootstrap: {kafka_stack.kafka.bootstrap_servers}\n"
        f"dirs:\n  data: {tmp / 'data'}\napi:\n  port: {port}\n"
    )
    settings = tmp / "api.yaml"
    settings.write_text(f"kind: api\ntopic: cards.activity-lt-{uuid.uuid4().hex[:8]}\n")
    log = tmp / "server.log"
    env = {**os.environ, "STREAMSIM_PAN_SECRET": "loadtest-it-secret-0123456789"}
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                STREAMSIM,
                "api",
                "--config",
                str(stack_file),
                "--settings",
                str(settings),
                "--no-access-log",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO_ROOT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, log.read_text()
        try:
            if httpx.get(f"{url}/v1/health", timeout=2).json()["state"]["status"] == "live":
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    yield url
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0, log.read_text()
