"""`bench api` parts: the bare reference app, the request stream, the closed-loop saturation
driver (against the canned-response server) and the report's contract keys."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import numpy as np
import orjson
import pytest
import uvloop
from fastapi.testclient import TestClient

from api.fraud.models import TransactionRequest
from core.pan import find_pan
from streamsim.bench.api import RequestStream, _report
from streamsim.bench.bare_app import PATH, create_bare_app
from streamsim.loadtest.closed_loop import Saturation, saturate
from streamsim.loadtest.config import PayloadMix
from streamsim.loadtest.payloads import PayloadSet, build_payloads
from tests.conftest import free_port


@pytest.fixture(scope="module")
def payloads() -> PayloadSet:
    mix = PayloadMix(cards=200, cities=30, invalid_share=0.0)
    return build_payloads(mix, np.arange(300) / 100.0, seed=3)


def test_bare_app_parses_the_body_and_answers_small_json(payloads: PayloadSet) -> None:
    body = payloads.body(0, "tx-bare-1", 1_767_225_600_000)
    headers = {"content-type": "application/json"}
    with TestClient(create_bare_app()) as client:
        response = client.post(PATH, content=body, headers=headers)
        assert response.status_code == 200
        assert response.json() == {"transaction_id": "tx-bare-1", "decision": "approve"}
        extra = body[:-1] + b',"cvv":"000"}'
        assert client.post(PATH, content=extra, headers=headers).status_code == 422


def test_request_stream_stamps_fresh_ids_on_valid_bodies(payloads: PayloadSet) -> None:
    stream = RequestStream("http://127.0.0.1:8000", payloads)
    requests = [stream() for _ in range(len(payloads) + 5)]  # wraps around the pool
    ids = set()
    for raw in requests:
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"POST /v1/transactions HTTP/1.1\r\nHost: 127.0.0.1:8000")
        assert f"Content-Length: {len(body)}".encode() in head
        tx = TransactionRequest.model_validate_json(body)
        ids.add(tx.transaction_id)
        assert abs(tx.event_time - time.time() * 1000) < 60_000
    assert len(ids) == len(requests)


def test_request_stream_ids_never_hold_a_card_number(payloads: PayloadSet) -> None:
    """A tag of hex digits only (about 1 in 43) made ids such as `bench-69145700-1994`, a
    Luhn-valid 12-digit run, which the endpoint rejects with a 422."""
    for _ in range(200):
        stream = RequestStream("http://127.0.0.1:8000", payloads)
        assert not any(c.isdigit() for c in stream.prefix.removeprefix("bench-"))
        ids = [f"{stream.prefix}{k}" for k in (1994, 52841, 10**7 - 1)]
        assert [find_pan(i) for i in ids] == [None, None, None]


@pytest.fixture(scope="module")
def canned() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamsim.bench.canned_server", "127.0.0.1", str(port)]
    )
    import socket

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


def test_saturation_counts_the_measured_window_only(canned: str, payloads: PayloadSet) -> None:
    stream = RequestStream(canned, payloads)
    run = uvloop.run(saturate(canned, stream, connections=4, warmup_s=0.3, duration_s=0.7))
    assert run.requests > 0 and run.statuses == {200: run.requests}
    assert run.total_requests > run.requests  # the warm-up's answers are not counted
    assert run.requests_per_s == pytest.approx(run.requests / 0.7)
    assert set(run.latency_ms) == {"p50", "p99"} and run.errors == 0
    assert stream.count >= run.total_requests


def fake(rate: float, p50: float = 1.0) -> Saturation:
    return Saturation(
        requests=int(rate * 10),
        requests_per_s=rate,
        latency_ms={"p50": p50, "p99": p50 * 4},
        statuses={200: int(rate * 10)},
        errors=0,
        total_requests=int(rate * 13),
        client_cpu_s=1.0,
        elapsed_s=13.0,
    )


def test_bench_report_has_the_contract_keys_and_medians(payloads: PayloadSet) -> None:
    report = _report(
        {"subject": [fake(1000, 2.0), fake(3000, 4.0)], "reference": [fake(4000), fake(4000)]},
        fake(50_000),
        {"subject": [2e-4, 3e-4], "reference": [8e-5, 9e-5]},
        321.0,
        connections=8,
        warmup_s=3,
        duration_s=10,
        payloads=payloads,
        load=((1.0, 1.0, 1.0), (2.0, 2.0, 2.0)),
        subject_log="",
    ).to_dict()
    assert list(report)[:7] == [
        "subject",
        "requests_per_s",
        "reference",
        "reference_rate",
        "ratio",
        "latency_ms",
        "peak_rss_mb",
    ]
    assert report["requests_per_s"] == 2000 and report["reference_rate"] == 4000
    assert report["ratio"] == 0.5
    assert report["latency_ms"] == {"p50": 3.0, "p99": 12.0}
    assert report["peak_rss_mb"] == 321.0
    assert report["generator_ceiling_per_s"] == 50_000
    assert report["server_cpu_us_per_request"] == {"subject": 250.0, "reference": 85.0}
    assert report["cpu_ratio"] == 0.34
    orjson.dumps(report)
