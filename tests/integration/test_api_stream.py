"""The server-sent-event routes of a real `streamsim api` (uvicorn) on the session broker: an
alert written to Kafka arrives on `/v1/stream/alerts`; a client resumes with `Last-Event-ID`
(exactly after its id, or told of a gap when the server no longer holds it); heartbeats flow
while nothing happens; a client that does not read is dropped, counted and told so.

Each test filters the shared `alerts` topic by a job name of its own (`?job=`)."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import pytest
from confluent_kafka import Producer

from core.config import StackConfig
from core.contracts import topics
from core.kafka import ensure_topics, producer_config
from live.views.stream import parse_id
from tests.integration.panel_api import panel_api

pytestmark = pytest.mark.integration

TOKEN = "it-stream-control-token"
ALERTS = topics.ALERTS.name
METRICS = topics.METRICS.name
HEARTBEAT_S = 0.5
QUEUE = 16
#: Rows written to one partition before the server starts: more than the feed's tail (500), so
#: the server holds none of that partition's first offsets (a resume from 0 is a gap).
FILLER = 600
FILLER_KEY = "it-stream-filler"
WAIT_S = 60.0


@dataclass
class Api:
    http: httpx.Client
    url: str
    log: Path
    producer: Producer
    filler_partition: int


def alert(job: str, n: int, pad: int = 0, key: str | None = None) -> tuple[bytes, bytes]:
    record = {
        "alert_id": f"{job}-{n}",
        "rule": "velocity",
        "label": None,
        "entity_id": key or f"card-{n}",
        "event_time": 1_772_524_800_000 + n,
        "event_ids": [f"ev-{job}-{n}"],
        "evidence": orjson.dumps({"n": n, "pad": "x" * pad}).decode(),
        "source": "pipeline",
        "job": job,
        "detected_at": int(time.time() * 1000),
    }
    return (key or f"card-{n}").encode(), orjson.dumps(record)


def write(producer: Producer, rows: list[tuple[bytes, bytes]]) -> list[int]:
    """Produce `rows` to `alerts`; the partitions they landed on."""
    landed: list[int] = []

    def done(err: object, msg: object) -> None:
        assert err is None, err
        landed.append(msg.partition())  # type: ignore[attr-defined]

    for key, value in rows:
        while True:
            try:
                producer.produce(ALERTS, value, key, on_delivery=done)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(30) == 0
    return landed


@pytest.fixture(scope="module")
def api(kafka_stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    work = tmp_path_factory.mktemp("stream")
    ensure_topics(kafka_stack, [ALERTS, METRICS])
    producer = Producer(producer_config(kafka_stack, **{"linger.ms": 5}))
    filler = f"it-stream-filler-{uuid.uuid4().hex[:6]}"
    landed = write(producer, [alert(filler, n, key=FILLER_KEY) for n in range(FILLER)])
    stack: dict[str, object] = {
        "kafka": {"bootstrap": kafka_stack.kafka.bootstrap_servers},
        "dirs": {"data": str(work / "data")},
    }
    env = pytest.MonkeyPatch()
    env.setenv("STREAMSIM_STREAM_HEARTBEAT_S", str(HEARTBEAT_S))
    env.setenv("STREAMSIM_STREAM_QUEUE", str(QUEUE))
    try:
        with panel_api(work, stack, f"cards.activity-it-{filler}", TOKEN, 30) as (http, log):
            env.undo()

            # The feed's tail follows `alerts` once it has assigned the topic's partitions.
            def following() -> bool:
                status = http.get("/v1/stream/status").json()
                return ":" in status["alerts"]["position"] and ":" in status["metrics"]["position"]

            wait(following)
            yield Api(http, str(http.base_url).rstrip("/"), log, producer, landed[0])
            assert "Traceback" not in log.read_text(), log.read_text()
    finally:
        env.undo()


def wait(check: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


@dataclass
class Sse:
    event: str | None = None
    id: str | None = None
    data: object = None
    comment: str | None = None


class Reader:
    """One open stream: its response and what it has sent so far."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.headers = response.headers
        self.seen: list[Sse] = []
        self._lines = response.iter_lines()
        self._current = Sse()

    def until(self, done: Callable[[list[Sse]], bool], timeout_s: float = WAIT_S) -> list[Sse]:
        """Every event (and comment, as its own entry) so far, once `done` holds of them."""
        deadline = time.monotonic() + timeout_s
        while not done(self.seen):
            assert time.monotonic() < deadline, [s for s in self.seen if s.comment is None]
            line = next(self._lines, None)
            assert line is not None, f"the stream ended first: {self.seen}"
            current = self._current
            if line.startswith(":"):
                self.seen.append(Sse(comment=line[1:].strip()))
            elif line.startswith("event: "):
                current.event = line.removeprefix("event: ")
            elif line.startswith("id: "):
                current.id = line.removeprefix("id: ")
            elif line.startswith("data: "):
                current.data = orjson.loads(line.removeprefix("data: "))
            elif line == "" and (current.event or current.data is not None):
                self.seen.append(current)
                self._current = Sse()
        return self.seen


def has(event: str, alert_id: str | None = None) -> Callable[[list[Sse]], bool]:
    def check(seen: list[Sse]) -> bool:
        return any(
            s.event == event
            and (alert_id is None or (isinstance(s.data, dict) and s.data["alert_id"] == alert_id))
            for s in seen
        )

    return check


def alerts_of(seen: list[Sse]) -> list[str]:
    return [s.data["alert_id"] for s in seen if s.event == "alert" and isinstance(s.data, dict)]


@contextmanager
def stream(api: Api, query: str, path: str = "alerts", **headers: str) -> Iterator[Reader]:
    request = api.http.build_request(
        "GET", f"/v1/stream/{path}?{query}", headers=headers, timeout=httpx.Timeout(30)
    )
    response = api.http.send(request, stream=True)
    try:
        assert response.status_code == 200, response.read()
        yield Reader(response)
    finally:
        response.close()


def test_an_alert_written_to_kafka_arrives_on_the_stream(api: Api) -> None:
    job = f"it-sse-{uuid.uuid4().hex[:8]}"
    with stream(api, f"job={job}", Origin="http://localhost:1") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["access-control-allow-origin"] == "http://localhost:1"
        response.until(has("live"))  # subscribed: what lands now is pushed
        write(api.producer, [alert("it-sse-other", 0), alert(job, 1)])
        seen = response.until(has("alert", f"{job}-1"))
    assert alerts_of(seen) == [f"{job}-1"]  # the other job's alert was filtered out
    (event,) = [s for s in seen if s.event == "alert"]
    assert parse_id(event.id) is not None
    assert event.data["evidence"]["n"] == 1  # type: ignore[index]
    with stream(api, f"job={job}", Origin="https://elsewhere.example") as response:
        assert "access-control-allow-origin" not in response.headers


def test_a_progress_report_arrives_on_the_metrics_stream(api: Api) -> None:
    job = f"it-sse-{uuid.uuid4().hex[:8]}"
    report = {"schema": "pipeline.progress/1", "job": job, "mode": "append",
              "query": f"{job}-q", "batch_id": 7, "input_rows": 10,
              "processed_rows_per_s": 42.5, "at": int(time.time() * 1000)}  # fmt: skip
    with stream(api, f"job={job}", path="metrics") as response:
        response.until(has("live"))
        api.producer.produce(METRICS, orjson.dumps(report), job.encode())
        assert api.producer.flush(30) == 0
        seen = response.until(lambda s: any(e.event == "progress" for e in s))
    (event,) = [s for s in seen if s.event == "progress"]
    assert isinstance(event.data, dict) and event.data["query"] == f"{job}-q"
    assert event.data["processed_rows_per_s"] == 42.5 and parse_id(event.id) is not None


def test_heartbeats_flow_while_nothing_lands(api: Api) -> None:
    with stream(api, f"job=it-sse-quiet-{uuid.uuid4().hex[:8]}") as response:
        seen = response.until(lambda s: sum(1 for e in s if e.comment) >= 2)
    beats = [s.comment for s in seen if s.comment]
    assert all(b.startswith("heartbeat ") for b in beats), beats
    assert not alerts_of(seen)


def test_a_client_resumes_with_last_event_id(api: Api) -> None:
    job = f"it-sse-{uuid.uuid4().hex[:8]}"
    with stream(api, f"job={job}") as response:
        response.until(has("live"))
        write(api.producer, [alert(job, 1)])
        seen = response.until(has("alert", f"{job}-1"))
    last_id = next(s.id for s in seen if s.event == "alert")
    assert last_id is not None
    # Written while the client is away.
    write(api.producer, [alert(job, 2), alert(job, 3)])
    wait(lambda: held(api, job, 3))
    with stream(api, f"job={job}", **{"Last-Event-ID": last_id}) as response:
        seen = response.until(has("live"))
    assert sorted(alerts_of(seen)) == [f"{job}-2", f"{job}-3"]  # each once, not the first
    assert not has("gap")(seen)

    # From offset 0 of the filler's partition: the server never held its first offsets.
    with stream(api, f"job={job}", **{"Last-Event-ID": f"{api.filler_partition}:0"}) as response:
        seen = response.until(has("live"))
    (gap,) = [s for s in seen if s.event == "gap"]
    missed = gap.data["missed"][str(api.filler_partition)]  # type: ignore[index]
    assert missed["from"] == 0 and missed["to"] >= FILLER - 500
    assert sorted(alerts_of(seen)) == [f"{job}-1", f"{job}-2", f"{job}-3"]  # what it holds

    with stream(api, f"job={job}", **{"Last-Event-ID": "yesterday"}) as response:
        seen = response.until(has("live"))
    (gap,) = [s for s in seen if s.event == "gap"]
    assert "yesterday" in gap.data["reason"]  # type: ignore[index]


def held(api: Api, job: str, n: int) -> bool:
    rows = api.http.get("/v1/alerts", params={"limit": 500}).json()["alerts"]
    return any(r["alert_id"] == f"{job}-{n}" for r in rows)


def test_a_client_that_does_not_read_is_dropped(api: Api) -> None:
    job = f"it-sse-slow-{uuid.uuid4().hex[:8]}"
    dropped_before = api.http.get("/v1/stream/status").json()["alerts"]["dropped"]
    host, port = api.url.removeprefix("http://").split(":")
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.connect((host, int(port)))
    slow.sendall(
        f"GET /v1/stream/alerts?job={job} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    )
    try:
        wait(lambda: api.http.get("/v1/stream/status").json()["alerts"]["subscribers"] >= 1)
        # Big alerts until the server's buffers to the client fill and its queue overflows.
        deadline = time.monotonic() + WAIT_S
        n = 0
        while api.http.get("/v1/stream/status").json()["alerts"]["dropped"] == dropped_before:
            assert time.monotonic() < deadline, "the slow client was never dropped"
            write(api.producer, [alert(job, n + i, pad=16_000) for i in range(50)])
            n += 50
            time.sleep(0.2)
        # Reading now: what was already on its way, then the `dropped` event, then the end.
        slow.settimeout(30)
        received = b""
        while not received.endswith(b"\r\n0\r\n\r\n"):  # the chunked body's end
            chunk = slow.recv(1 << 20)
            assert chunk, received[-300:]
            received += chunk
    finally:
        slow.close()
    assert b"event: dropped" in received
    sent = received.count(b"event: alert")
    assert 0 < sent < n, (sent, n)  # some went out before it stalled; not all
