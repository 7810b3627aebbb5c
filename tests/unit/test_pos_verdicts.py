"""POS mode's verdict records (`core.contracts.verdicts`) as the HTTP sink builds them, and the
scoring of those verdicts (`streamsim.evaluate.verdicts`): a timeout or a 5xx is never an
approval, a decline is a detection of the transaction's incident, and a decline of a genuine
transaction is a false positive."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import orjson
import pandas as pd

from core.contracts import verdicts
from core.contracts.foreign import fits
from simulators.sinks import MemorySink, Records, Topics
from simulators.sinks.http import HttpEventSink, transaction_id, verdict_record
from streamsim.evaluate import verdicts as scoring

URL = "http://pos.test/v1/transactions"


def test_a_2xx_records_its_decision_and_latency_from_the_intended_send_time() -> None:
    body = orjson.dumps(
        {"decision": "decline", "evidence": {"alerts": [{"label": "x", "event_ids": ["t1"]}]}}
    )
    r = verdict_record(
        "t1", "tok", status=200, content=body, sent_at_s=100.0, answered_at_s=100.25, attempts=1
    )
    assert r["outcome"] == "ok" and r["decision"] == "decline" and r["error"] is None
    assert r["alerts"] == [{"label": "x", "event_ids": ["t1"]}]
    assert r["latency_ms"] == 250.0 and (r["sent_at"], r["answered_at"]) == (100_000, 100_250)
    # every field of the contract, each of its type
    assert list(r) == [f.name for f in verdicts.CARD_VERDICT.fields]
    for f in verdicts.CARD_VERDICT.fields:
        assert (r[f.name] is None and f.nullable) or fits(f, r[f.name]), f.name


def test_a_5xx_or_a_timeout_has_no_decision_even_with_a_body_that_names_one() -> None:
    approve = orjson.dumps({"decision": "approve"})
    five = verdict_record(
        "t1", "tok", status=503, content=approve, sent_at_s=1, answered_at_s=2, attempts=3
    )
    assert (five["outcome"], five["decision"], five["error"]) == ("http_5xx", None, "HTTP 503")
    late = verdict_record(
        "t2", "tok", status=None, content=None, sent_at_s=1, answered_at_s=3,
        attempts=1, exc=httpx.ReadTimeout("read timed out"),
    )  # fmt: skip
    assert (late["outcome"], late["decision"], late["status"]) == ("timeout", None, None)
    assert late["error"].startswith("ReadTimeout")
    refused = verdict_record(
        None, "tok", status=None, content=None, sent_at_s=1, answered_at_s=1,
        attempts=1, exc=httpx.ConnectError("refused"),
    )  # fmt: skip
    assert refused["outcome"] == "connection_error"
    odd = verdict_record("t3", "tok", status=200, content=b"[1]", sent_at_s=1, answered_at_s=1,
                         attempts=1)  # fmt: skip
    assert (odd["outcome"], odd["decision"]) == ("ok", None)
    assert transaction_id(b'{"amount":1,"transaction_id":"cv-9"}') == "cv-9"


def test_the_sink_records_one_verdict_per_request_with_its_key() -> None:
    lock = threading.Lock()
    calls: dict[str, int] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        tx = orjson.loads(request.content)["transaction_id"]
        with lock:
            calls[tx] = calls.get(tx, 0) + 1
        if tx == "t1":
            return httpx.Response(503)
        if tx == "t2":
            raise httpx.ReadTimeout("slow", request=request)
        return httpx.Response(200, json={"decision": "decline" if tx == "t3" else "approve"})

    sink = HttpEventSink(
        MemorySink(), URL, transport=httpx.MockTransport(handler), retries=1, concurrency=2
    )
    sink.open(Topics("cards.transactions", "truth.cards"))
    bodies = [orjson.dumps({"transaction_id": f"t{i}", "amount": 1}) for i in range(5)]
    sink.write(Records([f"k{i}".encode() for i in range(5)], bodies, [0] * 5), Records())
    sink.close()
    got = {r["transaction_id"]: r for r in map(orjson.loads, sink.recorded.values)}
    assert set(got) == {f"t{i}" for i in range(5)}
    assert sink.recorded.keys == [got[tx]["card_token"].encode() for tx in map(
        lambda v: orjson.loads(v)["transaction_id"], sink.recorded.values)]  # fmt: skip
    assert got["t1"]["card_token"] == "k1"
    assert (got["t1"]["outcome"], got["t1"]["attempts"], calls["t1"]) == ("http_5xx", 2, 2)
    assert (got["t2"]["outcome"], got["t2"]["decision"]) == ("timeout", None)
    assert got["t3"]["decision"] == "decline" and got["t0"]["decision"] == "approve"
    assert all(r["latency_ms"] >= r["answered_at"] - r["sent_at"] - 1 for r in got.values())


def truth() -> pd.DataFrame:
    """Two incidents (a: e1, e2 of card_testing; b: e3 of impossible_travel), three genuine
    transactions (g1 a hard negative)."""
    rows = [
        ("r-e1", "card_testing", "a", 1_000),
        ("r-e2", "card_testing", "a", 2_000),
        ("r-e3", "impossible_travel", "b", 3_000),
        ("r-g1", "none", None, 4_000),
        ("r-g2", "none", None, 5_000),
        ("r-g3", "none", None, 6_000),
    ]
    frame = pd.DataFrame(rows, columns=["event_id", "label", "incident_id", "true_time"])
    frame["dropped"] = None
    frame["duplicate_of"] = None
    frame["hard_negative"] = [None, None, None, "lookalike", None, None]
    return frame


def verdict(tx: str, outcome: str = "ok", decision: str | None = None, **more: Any) -> dict:
    return {"transaction_id": tx, "outcome": outcome, "decision": decision,
            "answered_at": 10, "latency_ms": 5.0, **more}  # fmt: skip


def test_declines_are_scored_against_truth_and_failures_are_not_approvals() -> None:
    found = scoring.latest(
        [
            verdict("r-e1", decision="approve"),
            verdict("r-e1", decision="decline"),  # a retry's answer: the last counts
            verdict("r-e2", "http_5xx"),
            verdict("r-e3", "timeout"),
            verdict("r-g1", decision="decline"),
            verdict("r-g2", decision="approve"),
            verdict("r-g3", decision="review"),
            verdict("other-e1", decision="decline"),  # another run's
        ],
        "r-",
    )
    rows = scoring.detection_rows(found, truth())
    assert rows == [
        {"label": "card_testing", "event_ids": ["r-e1"], "at": 10},
        {"label": None, "event_ids": ["r-g1"], "at": 10},
    ]
    frame = pd.DataFrame(rows, columns=["label", "event_ids", "at"])
    frame["detected_sim_ms"] = float("nan")
    out = scoring.summary(found, frame, truth(), "simulator")
    assert out["requests"] == 6 and out["attributed"] is True
    assert out["outcomes"] == {"ok": 4, "http_4xx": 0, "http_5xx": 1, "shed": 0, "timeout": 1,
                               "connection_error": 0, "error": 0}  # fmt: skip
    assert out["decisions"] == {"approve": 1, "decline": 2, "review": 1}
    assert out["fraud_unanswered"] == {"http_5xx": 1, "timeout": 1}
    # one decline of two on fraud; one incident of two caught
    assert out["any_fraud"]["precision"] == 0.5 and out["any_fraud"]["recall"] == 0.5
    assert out["latency_ms"] == {"p50": 5.0, "p99": 5.0}


def test_named_alerts_are_scored_by_their_own_labels() -> None:
    found = [
        verdict("r-e2", decision="decline",
                alerts=[{"label": "card_testing", "event_ids": ["r-e1", "r-e2"]}]),
        verdict("r-e3", decision="decline",
                alerts=[{"label": "card_testing", "event_ids": ["r-e3"]}]),  # wrong type
    ]  # fmt: skip
    assert scoring.attributed(found) is False
    rows = scoring.detection_rows(found, truth())
    assert [r["label"] for r in rows] == ["card_testing", "card_testing"]
    assert rows[1]["event_ids"] == ["r-e3"]
