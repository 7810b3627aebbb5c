"""The fraud endpoint's default durability and its load shedding, on the session broker and a
real `streamsim api` (uvicorn) process.

- kill -9 under load: every decision answered 200 before the kill is in `cards.activity`
  once the endpoint is back (under `ack` it answers once the broker acknowledged the record;
  under `log` once the record is in its write-ahead log, replayed on restart);
- past `max_in_flight`: 429 with Retry-After and an error body, never a 5xx.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from api.fraud.settings import ApiSettings
from core.config import StackConfig
from core.kafka.admin import ensure_topics
from core.kafka.reader import read_topic
from runs import commands
from streamsim.bench.api import ServerProcess, wait_ready
from streamsim.chaos.endpoint import Load, seeded_requests
from tests.conftest import free_port

pytestmark = pytest.mark.integration
PAN_SECRET = "durability-it-secret-0123456789"


class Endpoint:
    """`streamsim api` on a free port with `settings`, deciding into a topic of its own;
    `start()` (again after a kill: same port, same write-ahead log) waits until it is live
    (`live`), else until it answers."""

    def __init__(
        self, kafka_stack: StackConfig, tmp: Path, ensure: bool, live: bool, settings: Any
    ) -> None:
        port = free_port()
        self.topic = f"cards.activity-dur-{uuid.uuid4().hex[:8]}"
        if ensure:
            ensure_topics(kafka_stack, [self.topic])
        stack_file = tmp / "stack.yaml"
        stack_file.write_text(
            f"kafka:\n  bootstrap: {kafka_stack.kafka.bootstrap_servers}\n"
            f"dirs:\n  data: {tmp / 'data'}\napi:\n  port: {port}\n"
        )
        settings_file = tmp / "api.yaml"
        settings_file.write_text(
            yaml.safe_dump({"kind": "api", "topic": self.topic, "profiles_topic": None, **settings})
        )
        self.command = commands.api(stack_file, settings_file)
        self.env = {**os.environ, "STREAMSIM_PAN_SECRET": PAN_SECRET}
        self.log = tmp / "api.log"
        self.url = f"http://127.0.0.1:{port}"
        self.live = live
        self.server: ServerProcess | None = None

    def start(self) -> ServerProcess:
        self.server = ServerProcess("fraud endpoint", self.command, self.log, self.env)
        wait_ready(self.server, self._ready)
        return self.server

    def _ready(self) -> bool:
        health = httpx.get(f"{self.url}/v1/health", timeout=2).json()
        return not self.live or bool(health["state"]["status"] == "live")


@contextmanager
def endpoint(
    kafka_stack: StackConfig, tmp: Path, ensure: bool = True, live: bool = True, **settings: Any
) -> Iterator[tuple[Endpoint, str, str]]:
    rig = Endpoint(kafka_stack, tmp, ensure, live, settings)
    try:
        rig.start()
        yield rig, rig.url, rig.topic
    finally:
        if rig.server is not None:
            rig.server.stop()


def test_kill_9_under_load_loses_no_answered_decision_by_default(
    kafka_stack: StackConfig, tmp_path: Path
) -> None:
    assert ApiSettings().durability in ("ack", "log")  # the default this test proves
    ids, bodies = seeded_requests(2_000, seed=33)
    with endpoint(kafka_stack, tmp_path) as (rig, url, topic):
        server = rig.server
        assert server is not None
        load = Load(url, bodies, ids)
        threads = load.run(list(range(len(ids))), background=True)
        while load.answered() < 1_000:
            server.check_alive()
            assert any(t.is_alive() for t in threads), dict(load.statuses)
        os.killpg(server.proc.pid, signal.SIGKILL)
        server.proc.wait(30)
        load.halt.set()
        for thread in threads:
            thread.join(60)
        answered = {a.transaction_id for a in load.answers}
        rig.start()  # back (under `log`: its write-ahead log replayed before it is live)
        in_topic = {str(r["transaction_id"]) for r in read_topic(kafka_stack, topic)}
    assert set(load.statuses) == {200}
    assert len(answered) >= 1_000
    assert answered - in_topic == set()  # not one answered decision lost
    assert in_topic <= set(ids)


def test_past_the_bound_requests_are_shed_with_429_and_retry_after(
    kafka_stack: StackConfig, tmp_path: Path
) -> None:
    ids, bodies = seeded_requests(1_500, seed=34)
    with endpoint(kafka_stack, tmp_path, max_in_flight=2, retry_after_s=2) as (_, url, _topic):
        shed: list[httpx.Response] = []

        class Shedding(Load):
            def _worker(self, queue: Iterator[int]) -> None:  # keeps every 429 too
                with httpx.Client(base_url=self.url, timeout=30) as client:
                    while (i := self._take(queue)) is not None:
                        response = client.post(
                            "/v1/transactions",
                            content=self.bodies[i],
                            headers={"content-type": "application/json"},
                        )
                        with self._lock:
                            self.statuses[response.status_code] += 1
                            if response.status_code == 429:
                                shed.append(response)

        load = Shedding(url, bodies, ids)
        threads = [t for _ in range(4) for t in load.run(list(range(len(ids))), background=True)]
        for thread in threads:
            thread.join(120)
        stats = httpx.get(f"{url}/v1/stats", timeout=5).json()
    assert sum(load.statuses.values()) == len(ids) * 4
    assert set(load.statuses) == {200, 429}, dict(load.statuses)  # no 5xx, nothing else
    assert all(r.headers["retry-after"] == "2" for r in shed)
    assert all(r.json()["detail"].startswith("overloaded: 2 transactions") for r in shed)
    assert stats["shed"] == load.statuses[429]
    assert stats["errors"] == 0


def test_without_a_broker_ack_answers_503_with_retry_after_not_200(tmp_path: Path) -> None:
    unreachable = StackConfig.model_validate({"kafka": {"bootstrap": f"127.0.0.1:{free_port()}"}})
    _ids, bodies = seeded_requests(1, seed=36)
    with endpoint(
        unreachable, tmp_path, ensure=False, ack_timeout_s=1, rebuild_timeout_s=1,
        flush_timeout_s=1, live=False,
    ) as (_, url, _topic):  # fmt: skip
        headers = {"content-type": "application/json"}
        first = httpx.post(f"{url}/v1/transactions", content=bodies[0], headers=headers)
        retry = httpx.post(f"{url}/v1/transactions", content=bodies[0], headers=headers)
        stats = httpx.get(f"{url}/v1/stats", timeout=5).json()
    for answer in (first, retry):  # the retry waits on the same unacknowledged record
        assert answer.status_code == 503
        assert answer.headers["retry-after"] == "1"
        assert "not acknowledged by the broker" in answer.json()["detail"]
    assert stats["decisions"]["approve"] + stats["decisions"]["review"] == 1
    assert stats["replays"] == 1 and stats["publish"]["delivered"] == 0
