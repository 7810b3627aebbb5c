"""An endpoint that is not ours, scored by what it answered: a plain `http.server` with a naive
velocity rule (decline a card's third use within two minutes of event time; it never reads
truth), driven by the simulator in POS mode against the real broker, then `streamsim evaluate
cards` scores the verdicts the simulator recorded on `cards.verdicts`. A planted share of
requests gets a 503 and another share answers too late: both must be counted as such, never as
approvals."""

from __future__ import annotations

import contextlib
import json
import re
import sys
import threading
import time
import uuid
import zlib
from collections import defaultdict, deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest
import yaml

from core.config import StackConfig
from core.contracts import labels
from core.kafka.reader import read_topic
from scenarios.cards.scenario import CardsScenario
from scenarios.catalog import ScenarioConfig
from tests.conftest import REPO_ROOT, streamsim_json

pytestmark = pytest.mark.integration

#: The naive rule: the `USES`-th use of a card within `WINDOW_MS` of event time is declined.
USES, WINDOW_MS = 3, 120_000
#: Planted failures, chosen by a hash of the transaction id (not by truth): 4% answer 503,
#: 2% answer after `SLOW_S`, past the simulator's timeout.
FAIL_PCT, SLOW_PCT = 4, 2
TIMEOUT_S, SLOW_S = 1.0, 2.5


def bucket(tx: str) -> int:
    return zlib.crc32(tx.encode()) % 100


class NaiveEndpoint(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the simulator reuses its connections
    uses: ClassVar[dict[str, deque[int]]] = defaultdict(deque)
    lock = threading.Lock()
    answered: ClassVar[dict[str, str]] = {}

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        tx, b = body["transaction_id"], bucket(body["transaction_id"])
        if b < FAIL_PCT:
            self._answer(503, {"error": "overloaded"})
            return
        if b < FAIL_PCT + SLOW_PCT:
            time.sleep(SLOW_S)
        with self.lock:
            seen = self.uses[body["card_number"]]
            seen.append(body["event_time"])
            recent = sum(1 for t in seen if abs(body["event_time"] - t) <= WINDOW_MS)
            decision = "decline" if recent >= USES else "approve"
            self.answered[tx] = decision
        self._answer(200, {"transaction_id": tx, "decision": decision})

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(data)  # (the simulator may have given up on a slow answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class QuietServer(ThreadingHTTPServer):
    request_queue_size = 128
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection the simulator dropped after its timeout is not an error here."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture
def endpoint() -> Iterator[str]:
    NaiveEndpoint.uses.clear()
    NaiveEndpoint.answered.clear()
    server = QuietServer(("127.0.0.1", 0), NaiveEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/score"
    finally:
        server.shutdown()
        server.server_close()


def test_an_endpoint_that_is_not_ours_is_scored_by_its_answers(
    kafka_stack: StackConfig, endpoint: str, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    stack_file = tmp_path / "stack.yaml"
    stack_file.write_text(
        f"kafka:\n  bootstrap: {kafka_stack.kafka.bootstrap_servers}\n"
        f"dirs:\n  data: {tmp_path / 'data'}\n"
    )
    data = yaml.safe_load((REPO_ROOT / "config" / "scenarios" / "cards.yaml").read_text())
    data.update(seed=11, run_id=f"it-pos-{suffix}", entities=2000, duration_s=3600)
    d = data["domain"]
    d["topic"] = f"it-pos.transactions-{suffix}"
    d["delivery"] = "http"
    d["endpoint"] = {"url": endpoint, "concurrency": 16, "timeout_s": TIMEOUT_S, "retries": 0}
    d["profiles"] = {"publish": False}
    d["fraud"]["card_testing"]["rate_per_1k_card_hours"] = 12.0  # 24x: a few dozen incidents
    scenario = tmp_path / "cards.yaml"
    scenario.write_text(yaml.safe_dump(data))
    # exit 1: requests went unanswered (the planted ones), and the summary says so
    run = streamsim_json(
        "simulate", str(scenario), "--speed", "max", "--config", str(stack_file), exit_code=1
    )
    prefix = run["id_prefix"]

    recorded = [r for r in read_topic(kafka_stack, "cards.verdicts") if
                str(r.get("transaction_id")).startswith(prefix)]  # fmt: skip
    assert len(recorded) >= 1500
    # the simulator posted card numbers; it records tokens, never a card number
    pans = CardsScenario(ScenarioConfig.model_validate(data), kafka_stack).cards.pans or []
    assert len(pans) == 2000
    text = orjson.dumps(recorded).decode()
    assert not [p for p in pans if p in text]
    by_tx = {r["transaction_id"]: r for r in recorded}
    assert len(recorded) == run["http"]["requests"]  # one record per request sent
    unplanned: list[dict[str, Any]] = []  # a loaded machine may time out an ordinary request
    for tx, r in by_tx.items():  # what the server did is what was recorded
        b = bucket(tx)
        if b < FAIL_PCT:
            assert (r["outcome"], r["status"], r["decision"]) == ("http_5xx", 503, None), r
        elif b < FAIL_PCT + SLOW_PCT:
            assert (r["outcome"], r["decision"]) == ("timeout", None), r
            assert r["latency_ms"] >= TIMEOUT_S * 1000 * 0.9, r
        elif r["outcome"] == "ok":
            assert r["decision"] == NaiveEndpoint.answered[tx], r
        else:
            assert r["outcome"] in ("timeout", "connection_error") and r["decision"] is None, r
            unplanned.append(r)
        assert re.fullmatch(r"tok_[0-9a-f]{32}", r["card_token"]), r
    assert len(unplanned) <= len(by_tx) // 100, unplanned[:3]

    report = streamsim_json("evaluate", "cards", "--run", prefix, "--config", str(stack_file))
    assert report["run"]["id_prefix"] == prefix
    found = report["verdicts"]
    assert found["source"] == "simulator (cards.verdicts)" and found["attributed"] is True
    planted_5xx = sum(1 for tx in by_tx if bucket(tx) < FAIL_PCT)
    planted_slow = sum(1 for tx in by_tx if FAIL_PCT <= bucket(tx) < FAIL_PCT + SLOW_PCT)
    assert found["requests"] == len(by_tx)
    assert found["outcomes"]["http_5xx"] == planted_5xx and planted_5xx >= 40
    late = sum(1 for r in unplanned if r["outcome"] == "timeout")
    assert found["outcomes"]["timeout"] == planted_slow + late and planted_slow >= 20
    assert found["outcomes"]["ok"] == len(by_tx) - planted_5xx - planted_slow - len(unplanned)
    assert sum(found["decisions"].values()) == found["outcomes"]["ok"]  # failures: no decision
    assert sum(found["fraud_unanswered"].values()) >= 1, found

    scores = report["paths"]["endpoint"]
    assert set(scores) == set(labels.CARD_FRAUDS)
    testing = scores["card_testing"]
    print("measured:", json.dumps({"verdicts": found, "card_testing": testing}))
    # a velocity rule catches card testing; a join on the wrong ids would score ~0 here
    assert testing["support"] >= 15, testing
    assert 0.7 <= testing["recall"] <= 1.0, testing
    assert testing["precision"] is None and testing["attributed"] is True
    one = found["any_fraud"]
    # declines of genuine cards (shoppers, airports) exist: precision is real, not 1.0
    assert 0.3 <= one["precision"] < 1.0, one
    assert one["support"] >= testing["support"] and 0.6 <= one["recall"] <= 1.0, one
    assert report["unknown_label_alerts"]["endpoint"].get("<none>", 0) >= 1
