"""`streamsim api --service fraud --instances 2`: two endpoint processes on one port
(SO_REUSEPORT), each answering and publishing; every decision answered 200 is in the topic."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import psutil
import pytest

from core.config import StackConfig
from core.kafka.admin import ensure_topics
from core.kafka.reader import read_topic
from streamsim.chaos.endpoint import Load, seeded_requests
from tests.conftest import REPO_ROOT, STREAMSIM, free_ports

pytestmark = pytest.mark.integration


def test_two_instances_share_the_port_and_lose_nothing(
    kafka_stack: StackConfig, tmp_path: Path
) -> None:
    port = free_ports(3)  # --instances 2: the port and one above it per instance
    topic = f"cards.activity-inst-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_stack, [topic])
    (tmp_path / "stack.yaml").write_text(
        f"kafka:\n  bootstrap: {kafka_stack.kafka.bootstrap_servers}\n"
        f"dirs:\n  data: {tmp_path / 'data'}\napi:\n  port: {port}\n"
    )
    (tmp_path / "api.yaml").write_text(f"kind: api\ntopic: {topic}\nprofiles_topic: null\n")
    env = {**os.environ, "STREAMSIM_PAN_SECRET": "instances-it-secret-0123456789"}
    log = tmp_path / "api.log"
    with log.open("ab") as out:
        parent = subprocess.Popen(
            [STREAMSIM, "api", "--config", str(tmp_path / "stack.yaml"), "--settings",
             str(tmp_path / "api.yaml"), "--no-access-log", "--service", "fraud",
             "--instances", "2"],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while len(psutil.Process(parent.pid).children()) < 2 or not _live_twice(url):
            assert parent.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.3)
        ids, bodies = seeded_requests(600, seed=35)
        load = Load(url, bodies, ids)
        load.run(list(range(len(ids))))
        # A fresh connection per GET: the kernel spreads them over both instances.
        stats = [httpx.get(f"{url}/v1/stats", timeout=5).json() for _ in range(40)]
        sent = {s["publish"]["sent"] for s in stats}
        panel = httpx.get(f"{url}/v1/runs", timeout=5).status_code
    finally:
        parent.send_signal(signal.SIGTERM)
        code = parent.wait(60)
    assert code == 0, log.read_text()[-3000:]
    assert set(load.statuses) == {200} and len(load.answers) == len(ids)
    # The two instances' counts add up to every request; an even split is one value in the set.
    assert (len(sent) == 2 and sum(sent) == len(ids)) or sent == {len(ids) / 2}, sent
    assert panel == 404  # --service fraud: no panel routes
    in_topic = {str(r["transaction_id"]) for r in read_topic(kafka_stack, topic)}
    assert {a.transaction_id for a in load.answers} <= in_topic


def _live_twice(url: str) -> bool:
    try:
        return all(
            httpx.get(f"{url}/v1/health", timeout=2).json()["state"]["status"] == "live"
            for _ in range(6)
        )
    except httpx.TransportError:
        return False
