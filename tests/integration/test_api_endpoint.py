"""The fraud endpoint as users run it: `streamsim api` (real uvicorn) against the real broker.

- decisions are published to the activity topic once per transaction_id, keyed by card token,
  with token + last 4 and no PAN anywhere in the topic or in the server's log output;
- a restarted server rebuilds its state from the topic: it detects impossible travel against a
  use made before the restart, and answers a pre-restart repeat byte for byte, unpublished;
- a burst of cards at one terminal, split by a restart, yields exactly one compromised_terminal
  verdict and record, and a busy terminal below the threshold none.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from core.config import StackConfig
from core.kafka import consumer_config
from core.pan import PanTokenizer, make_pans
from tests.conftest import REPO_ROOT, STREAMSIM, free_port

pytestmark = pytest.mark.integration

SECRET = "integration-pan-secret-0123456789"
API_TOKEN = "integration-control-token"
PANS = ["4111111111111111", "5555555555554444", "378282246310005"]
T0 = 1_767_225_600_000
LONDON = (51.5074, -0.1278)
SYDNEY = (-33.8688, 151.2093)
PARIS = (48.8566, 2.3522)


def tx(txid: str, card: str, at_ms: int, where: tuple[float, float] | None, **more: Any) -> dict:
    body: dict[str, Any] = {
        "transaction_id": txid,
        "card_number": card,
        "amount": 30.0,
        "currency": "EUR",
        "merchant_id": "m-1",
        "merchant_category": "5812",
        "channel": "card_present" if where else "online",
        "country": "GB",
        "event_time": at_ms,
        "terminal_id": "pos-1" if where else None,
    }
    if where:
        body["lat"], body["lon"] = where
    body.update(more)
    return body


class Server:
    """`streamsim api` in a subprocess; its stdout and stderr go to one log file."""

    def __init__(
        self,
        stack_file: Path,
        settings_file: Path,
        log: Path,
        wait_for: str = "live",
        *extra_args: str,
    ) -> None:
        self.log = log
        port = int(stack_file.read_text().split("port: ")[-1].split()[0])
        self.url = f"http://127.0.0.1:{port}"
        env = {
            **os.environ,
            "STREAMSIM_PAN_SECRET": SECRET,
            "STREAMSIM_API_TOKEN": API_TOKEN,
            "PYTHONUNBUFFERED": "1",
        }
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    STREAMSIM,
                    "api",
                    "--config",
                    str(stack_file),
                    "--settings",
                    str(settings_file),
                    *extra_args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO_ROOT,
            )
        self.http = httpx.Client(base_url=self.url, timeout=10)
        self._wait(wait_for)

    def _wait(self, status: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"server exited: {self.log.read_text()}"
            try:
                health = self.http.get("/v1/health").json()
                if health["state"]["status"] == status:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"server not {status} after {timeout_s}s: {self.log.read_text()}")

    def post(self, body: dict) -> httpx.Response:
        return self.http.post("/v1/transactions", json=body)

    def wait_published(self, count: int, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.http.get("/v1/stats").json()["publish"]["delivered"] >= count:
                return
            time.sleep(0.1)
        raise AssertionError(f"not delivered: {self.http.get('/v1/stats').json()['publish']}")

    def stop(self) -> int:
        self.http.close()
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout=30)


@pytest.fixture
def setup(kafka_stack: StackConfig, tmp_path: Path) -> Iterator[tuple[Path, Path, str]]:
    """A stack file pointing at the session broker, a free API port, and a fresh topic."""
    topic = f"cards.activity-it-{uuid.uuid4().hex[:8]}"
    stack_file = tmp_path / "stack.yaml"
    stack_file.write_text(
        f"kafka:\n  bootstrap: {kafka_stack.kafka.bootstrap_servers}\n"
        f"dirs:\n  data: {tmp_path / 'data'}\n"
        f"api:\n  port: {free_port()}\n"
    )
    settings_file = tmp_path / "api.yaml"
    settings_file.write_text(f"kind: api\ntopic: {topic}\nrebuild_timeout_s: 30\n")
    yield stack_file, settings_file, topic


def read_topic(stack: StackConfig, topic: str) -> list[tuple[bytes, bytes, int]]:
    """Every record of `topic`: (key, value, partition)."""
    consumer = Consumer(
        consumer_config(stack, f"it-{uuid.uuid4().hex[:8]}", **{"enable.partition.eof": True})
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        pending, out = set(partitions), []
        deadline = time.monotonic() + 30
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                err = msg.error()
                if err is not None:
                    assert err.code() == KafkaError._PARTITION_EOF, err
                    pending.discard(msg.partition())
                    continue
                out.append((msg.key() or b"", msg.value() or b"", msg.partition() or 0))
        assert not pending, f"partitions {pending} not read to the end"
        return out
    finally:
        consumer.close()


def test_decisions_are_published_once_with_token_and_no_pan_anywhere(
    kafka_stack: StackConfig, setup: tuple[Path, Path, str], tmp_path: Path
) -> None:
    stack_file, settings_file, topic = setup
    log = tmp_path / "server.log"
    server = Server(stack_file, settings_file, log)
    tokenizer = PanTokenizer(SECRET.encode())
    try:
        bodies = [
            tx("a1", PANS[0], T0, LONDON),
            tx("a2", PANS[0], T0 + 3 * 60_000, SYDNEY, country="AU"),
            tx("b1", PANS[1], T0, PARIS, country="FR"),
            tx("b2", PANS[1], T0 + 60_000, None),
            tx("c1", PANS[2], T0, None, amount=1.0),
        ]
        verdicts = {b["transaction_id"]: server.post(b) for b in bodies}
        repeats = [server.post(bodies[1]), server.post(bodies[4]), server.post(bodies[1])]
        assert all(r.status_code == 200 for r in [*verdicts.values(), *repeats])
        assert repeats[0].content == repeats[2].content == verdicts["a2"].content
        assert repeats[1].content == verdicts["c1"].content
        assert verdicts["a2"].json()["decision"] == "decline"
        assert verdicts["a1"].json()["reasons"] == ["no_history"]
        # Things that could leak a PAN into the log or a response.
        bad = server.post(tx("x1", PANS[0], T0, LONDON, amount=-1, pan=PANS[0]))
        assert bad.status_code == 422 and PANS[0] not in bad.text
        assert server.http.get(f"/v1/cards/{PANS[0]}/last-use").status_code == 404
        token = tokenizer.token(PANS[0])
        last = server.http.get(f"/v1/cards/{token}/last-use").json()
        assert last["last_use"]["transaction_id"] == "a2"
        server.wait_published(len(bodies))
        stats = server.http.get("/v1/stats").json()
        assert stats["replays"] == 3 and stats["rejected"] == 1
        assert stats["publish"]["failed"] == 0
        assert stats["latency_ms"]["count"] == len(bodies) + 4
    finally:
        code = server.stop()
    assert code == 0, log.read_text()

    records = read_topic(kafka_stack, topic)
    values = [orjson.loads(v) for _, v, _ in records]
    unique_ids = sorted(b["transaction_id"] for b in bodies)
    assert sorted(v["transaction_id"] for v in values) == unique_ids  # repeats not republished
    for (key, _, _), value in zip(records, values, strict=True):
        pan = next(b["card_number"] for b in bodies if b["transaction_id"] == value["event_id"])
        assert key.decode() == value["card_token"] == tokenizer.token(pan)
        assert value["card_last4"] == pan[-4:]
        assert value["decision"] == verdicts[value["transaction_id"]].json()["decision"]
    # Same card, same partition (keyed by token).
    assert len({p for k, _, p in records if k == tokenizer.token(PANS[0]).encode()}) == 1
    everything = b"".join(k + v for k, v, _ in records)
    output = log.read_text()
    for pan in PANS:
        assert pan.encode() not in everything
        assert pan not in output
    # The log did see the requests that carried a PAN, masked.
    assert "/v1/cards/************1111/last-use" in output
    assert '"POST /v1/transactions HTTP/1.1" 422' in output


def test_restart_rebuilds_the_state_from_the_topic(
    kafka_stack: StackConfig, setup: tuple[Path, Path, str], tmp_path: Path
) -> None:
    stack_file, settings_file, topic = setup
    log = tmp_path / "server.log"
    first = Server(stack_file, settings_file, log)
    try:
        london = first.post(tx("r1", PANS[0], T0, LONDON))
        other = first.post(tx("r2", PANS[1], T0, PARIS, country="FR"))
        assert london.json()["decision"] == other.json()["decision"] == "approve"
        first.wait_published(2)
    finally:
        assert first.stop() == 0, log.read_text()

    second = Server(stack_file, settings_file, log)
    try:
        stats = second.http.get("/v1/stats").json()
        assert stats["state"]["applied_from_topic"] == 2
        sydney = second.post(tx("r3", PANS[0], T0 + 3 * 60_000, SYDNEY, country="AU")).json()
        assert sydney["decision"] == "decline"
        assert sydney["reasons"] == ["impossible_travel"]
        assert sydney["evidence"]["travel"]["previous"]["transaction_id"] == "r1"
        assert sydney["evidence"]["previous_use"]["transaction_id"] == "r1"
        repeat = second.post(tx("r1", PANS[0], T0, LONDON))
        assert repeat.content == london.content  # the pre-restart verdict, byte for byte
        second.wait_published(1)
        assert second.http.get("/v1/stats").json()["replays"] == 1
    finally:
        assert second.stop() == 0, log.read_text()

    ids = sorted(orjson.loads(v)["transaction_id"] for _, v, _ in read_topic(kafka_stack, topic))
    assert ids == ["r1", "r2", "r3"]  # r1 was not republished


def test_decides_while_kafka_is_unreachable_and_counts_what_it_could_not_publish(
    tmp_path: Path,
) -> None:
    stack_file = tmp_path / "stack.yaml"
    stack_file.write_text(
        f"kafka:\n  bootstrap: 127.0.0.1:{free_port()}\n"  # nothing listens there
        f"dirs:\n  data: {tmp_path / 'data'}\n"
        f"api:\n  port: {free_port()}\n"
    )
    settings_file = tmp_path / "api.yaml"
    # durability none: it answers before the broker acknowledges (under the default, ack, it
    # answers 503 instead: tests/integration/test_api_durability.py).
    settings_file.write_text(
        "kind: api\nrebuild_timeout_s: 1\nflush_timeout_s: 1\ndurability: none\n"
    )
    log = tmp_path / "server.log"
    server = Server(stack_file, settings_file, log, "starting", "--json")
    try:
        verdict = server.post(tx("k1", PANS[0], T0, LONDON))
        assert verdict.status_code == 200
        assert verdict.json()["decision"] == "approve"
        assert verdict.json()["reasons"] == ["no_history", "state_incomplete"]
        health = server.http.get("/v1/health").json()
        assert health["status"] == "degraded"
        assert health["kafka"]["connected"] is False
        assert health["publish"]["queued"] == 1
        assert health["publish"]["failed"] == 0
    finally:
        code = server.stop()
    assert code == 0, log.read_text()
    output = log.read_text()
    assert "1 records to cards.activity not delivered at shutdown" in output
    summary = orjson.loads(output.strip().splitlines()[-1])  # --json: the last line
    assert summary["requests"] == 1
    assert summary["decisions"]["approve"] == 1
    assert summary["publish_failed"] == 1
    assert summary["published"] == 0
    assert PANS[0] not in output


def test_rebuild_lookback_bounds_what_a_restart_reads_back(
    setup: tuple[Path, Path, str], tmp_path: Path
) -> None:
    stack_file, settings_file, topic = setup
    log = tmp_path / "server.log"
    first = Server(stack_file, settings_file, log)
    try:
        assert first.post(tx("l1", PANS[0], T0, LONDON)).json()["decision"] == "approve"
        first.wait_published(1)
    finally:
        assert first.stop() == 0, log.read_text()

    for lookback_s, applied in ((3600, 1), (0, 0)):
        settings_file.write_text(
            f"kind: api\ntopic: {topic}\nrebuild_timeout_s: 30\nrebuild_lookback_s: {lookback_s}\n"
        )
        server = Server(stack_file, settings_file, log)
        try:
            assert server.http.get("/v1/stats").json()["state"]["applied_from_topic"] == applied
            sydney = tx(f"l-{lookback_s}", PANS[0], T0 + 3 * 60_000, SYDNEY, country="AU")
            verdict = server.post(sydney).json()
            want = ["impossible_travel"] if applied else ["no_history"]
            assert verdict["reasons"] == want, verdict
        finally:
            assert server.stop() == 0, log.read_text()


def test_a_terminal_burst_across_a_restart_yields_one_compromised_terminal_verdict(
    kafka_stack: StackConfig, setup: tuple[Path, Path, str], tmp_path: Path
) -> None:
    stack_file, settings_file, topic = setup
    log = tmp_path / "server.log"
    pans = make_pans(np.random.default_rng(12), 44, ["4"])

    def use(txid: str, pan: str, at_ms: int, terminal: str) -> dict:
        return tx(txid, pan, at_ms, PARIS, country="FR", merchant_id=terminal, terminal_id=terminal)

    # A busy till: 120 uses in 8 minutes by 9 cards. A skimmer: 25 cards in 4 minutes.
    busy = [use(f"b{i}", pans[25 + i % 9], T0 + i * 4_000, "pos-busy") for i in range(120)]
    skim = [use(f"s{i}", pans[i], T0 + i * 10_000, "pos-skim") for i in range(25)]
    verdicts: dict[str, dict] = {}
    first = Server(stack_file, settings_file, log)
    try:
        for body in [*busy, *skim[:6]]:
            verdicts[body["transaction_id"]] = first.post(body).json()
        first.wait_published(len(verdicts))
    finally:
        assert first.stop() == 0, log.read_text()

    second = Server(stack_file, settings_file, log)
    try:
        assert second.http.get("/v1/stats").json()["state"]["applied_from_topic"] == 126
        for body in skim[6:]:
            verdicts[body["transaction_id"]] = second.post(body).json()
        second.wait_published(len(skim) - 6)
    finally:
        assert second.stop() == 0, log.read_text()

    flagged = [t for t, v in verdicts.items() if "compromised_terminal" in v["reasons"]]
    assert flagged == ["s9"]  # the 10th card, counted across the restart; busy never
    assert verdicts["s9"]["decision"] == "review"
    records = [orjson.loads(v) for _, v, _ in read_topic(kafka_stack, topic)]
    alerts = [
        a for r in records for a in r["evidence"]["alerts"] if a["rule"] == "compromised_terminal"
    ]
    assert len(records) == len(verdicts) and len(alerts) == 1
    assert sorted(alerts[0]["event_ids"]) == sorted(f"s{i}" for i in range(10))
