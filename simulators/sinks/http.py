"""Events as HTTP requests: each event record's value is POSTed as a JSON body; truth records go
to another sink (Kafka or JSONL). The card scenario's POS mode uses it: the simulator plays the
terminals and asks the fraud endpoint for a verdict on every transaction.

- Requests leave in the order the engine hands them over (emit order, paced by the engine), on
  a pool of `concurrency` worker threads sharing one keep-alive connection pool; at most
  `concurrency` are in flight, so a slow endpoint slows the simulator instead of growing a
  queue.
- A connection error or a 5xx is retried (`retries` times, short backoff); a repeat is safe
  because the endpoint is idempotent on the transaction id.
- A 429 (the endpoint shed the request: too much in flight) is retried too, after its
  `Retry-After` (capped at `MAX_RETRY_AFTER_S`, at least the backoff), `retries` times. If
  every attempt is shed, the terminal does what a card terminal does when its issuer cannot
  answer: stand-in processing, approving offline up to a floor limit (`STAND_IN_FLOOR`) and
  declining above it. The request is recorded as `shed` (never as the endpoint's decision),
  and the counters keep both apart: `shed_retries` (429s retried) and `stand_in` (requests
  decided by the terminal, per stand-in decision).
- Several instances (`urls`, e.g. `streamsim api --instances N`'s own ports): with
  `affinity="token"` each card goes to one instance, chosen by a consistent hash of its token
  (the record key; `route`), as a card network routes a BIN range to one processor; with
  `affinity="none"` requests take the instances in turn, as a load balancer spreads them.
  Retries go to the same instance. `stats()["instances"]` counts the requests each got.
- Nothing is dropped silently: every response is counted by status, every request that never
  got a 2xx is counted as failed, and the first few error bodies (422 field errors included) are
  kept for the run summary, PAN-scrubbed.
- Every request's end is recorded (`core.contracts.verdicts`: transaction id, outcome, status,
  decision, latency from the intended send time) to the verdicts topic beside the run's
  topics (Kafka), to verdicts.jsonl (JSONL), else kept in `recorded`; written from the
  caller's thread, at each `write` and at `close`.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import httpx
import orjson
from hdrh.histogram import HdrHistogram

from core.contracts import verdicts
from core.contracts.topics import CARDS_VERDICTS
from core.pan import scrub_text
from simulators.sinks.base import Records, Sink, SinkReport, Topics

MAX_ERRORS_KEPT = 5
BACKOFF_S = 0.05
#: The longest a terminal waits on a 429's Retry-After before its retry (a customer is at
#: the till).
MAX_RETRY_AFTER_S = 1.0
#: Stand-in processing: approve offline up to this amount, decline above (a terminal's floor
#: limit; the amount in the request's own currency).
STAND_IN_FLOOR = 50.0
_ID_HEAD = b'{"transaction_id":"'


Affinity = Literal["token", "none"]


def _weight(key: bytes, url: str) -> bytes:
    return hashlib.blake2b(key + b"\x00" + url.encode(), digest_size=8).digest()


def route(key: bytes | str, urls: Sequence[str]) -> str:
    """The instance a card goes to: rendezvous (highest random weight) hashing of its token
    over the instances' URLs. Consistent: the same token always gets the same URL, and adding
    or removing an instance moves only the cards that go to (or went to) that one.

    >>> urls = ["http://h:8001/v1/transactions", "http://h:8002/v1/transactions"]
    >>> route("tok-1", urls) == route(b"tok-1", list(reversed(urls)))
    True
    """
    raw = key.encode() if isinstance(key, str) else key
    return max(urls, key=lambda url: _weight(raw, url))


def transaction_id(body: bytes) -> str | None:
    """The request's transaction id (the encoder writes it first; else the body is parsed).

    >>> transaction_id(b'{"transaction_id":"cv-1a","amount":1}'), transaction_id(b'[1]')
    ('cv-1a', None)
    """
    if body.startswith(_ID_HEAD):
        end = body.find(b'"', len(_ID_HEAD))
        if end > 0:
            return body[len(_ID_HEAD) : end].decode()
    try:
        value = orjson.loads(body).get("transaction_id")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return None if value is None else str(value)


def outcome_of(status: int | None, exc: BaseException | None = None) -> str:
    """How a request ended (`core.contracts.verdicts.OUTCOMES`).

    >>> outcome_of(200), outcome_of(503), outcome_of(422), outcome_of(None, httpx.ReadTimeout(""))
    ('ok', 'http_5xx', 'http_4xx', 'timeout')
    >>> outcome_of(429)
    'shed'
    """
    if exc is not None:
        if isinstance(exc, httpx.TimeoutException):
            return verdicts.TIMEOUT
        if isinstance(exc, httpx.TransportError):
            return verdicts.CONNECTION
        return verdicts.ERROR
    if status is None:
        return verdicts.ERROR
    if 200 <= status < 300:
        return verdicts.OK
    if status == 429:
        return verdicts.SHED
    if status >= 500:
        return verdicts.HTTP_5XX
    if status >= 400:
        return verdicts.HTTP_4XX
    return verdicts.ERROR


def retry_after(response: httpx.Response) -> float:
    """A 429's Retry-After in seconds (delta-seconds form; 0 when absent or a date)."""
    try:
        return max(0.0, float(response.headers.get("retry-after", "0")))
    except ValueError:
        return 0.0


def verdict_record(
    transaction: str | None,
    card_token: str,
    *,
    status: int | None,
    content: bytes | None,
    sent_at_s: float,
    answered_at_s: float,
    attempts: int,
    exc: BaseException | None = None,
    stand_in: str | None = None,
) -> dict[str, Any]:
    """The `cards.verdict` record of one request (`core.contracts.verdicts.CARD_VERDICT`): the
    decision and alerts come from a 2xx body only; a timeout or a 5xx has neither; a shed one
    names the terminal's `stand_in` decision in `error`."""
    outcome = outcome_of(status, exc)
    decision = alerts = None
    if outcome == verdicts.OK and content:
        try:
            body = orjson.loads(content)
        except orjson.JSONDecodeError:
            body = None
        if isinstance(body, dict):
            found = body.get("decision")
            decision = None if found is None else str(found)
            evidence = body.get("evidence")
            named = evidence.get("alerts") if isinstance(evidence, dict) else None
            alerts = named if isinstance(named, list) and named else None
    error = None
    if exc is not None:
        error = scrub_text(f"{type(exc).__name__}: {exc}")[:200]
    elif outcome == verdicts.SHED:
        error = f"HTTP 429; stand-in {stand_in}" if stand_in else "HTTP 429"
    elif outcome != verdicts.OK:
        error = f"HTTP {status}"
    return {
        "transaction_id": transaction,
        "card_token": card_token,
        "outcome": outcome,
        "status": status,
        "decision": decision,
        "alerts": alerts,
        "sent_at": int(sent_at_s * 1000),
        "answered_at": int(answered_at_s * 1000),
        "latency_ms": round((answered_at_s - sent_at_s) * 1000, 3),
        "attempts": attempts,
        "error": error,
    }


class HttpEventSink:
    def __init__(
        self,
        inner: Sink,
        url: str | Sequence[str],
        *,
        concurrency: int = 16,
        timeout_s: float = 10.0,
        retries: int = 2,
        transport: httpx.BaseTransport | None = None,
        verdicts_topic: str = CARDS_VERDICTS.name,
        affinity: Affinity = "token",
    ) -> None:
        """`inner` gets the truth records; `url`: the POST target, or several instances' (see
        `affinity`); `transport` is for tests (e.g. httpx.MockTransport); `verdicts_topic`:
        where each request's end is recorded (Kafka)."""
        urls = [url] if isinstance(url, str) else list(url)
        if not urls:
            raise ValueError("no endpoint URL")
        self.inner = inner
        self.verdicts_topic = verdicts_topic
        #: The verdict records, where the inner sink is neither Kafka nor JSONL.
        self.recorded = Records()
        self._pending_verdicts = Records()
        self._verdict_out: Any = None
        self.urls = urls
        self.url = ", ".join(urls)
        self.affinity: Affinity = affinity
        self._turns = itertools.count()
        self._per_url: Counter[str] = Counter()
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.retries = retries
        self._transport = transport
        self._client: httpx.Client | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._slots = threading.BoundedSemaphore(concurrency)
        self._lock = threading.Lock()
        self._in_flight = 0
        self._status: Counter[str] = Counter()
        self._decisions: Counter[str] = Counter()
        self._errors: Counter[str] = Counter()
        self._samples: list[str] = []
        self._sent = self._ok = self._failed = self._retried = self._shed_retries = 0
        self._stand_in: Counter[str] = Counter()
        self._latency = HdrHistogram(1, 60_000_000, 3)  # microseconds

    def open(self, topics: Topics) -> None:
        self.inner.open(topics)
        self._client = httpx.Client(
            timeout=self.timeout_s,
            limits=httpx.Limits(
                max_connections=self.concurrency, max_keepalive_connections=self.concurrency
            ),
            headers={"content-type": "application/json"},
            transport=self._transport,
        )
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="pos")
        self._verdict_out = self._verdict_writer()

    def _verdict_writer(self) -> Any:
        """Where the verdict records go: a callable taking `Records`."""
        from simulators.sinks.jsonl import JsonlSink
        from simulators.sinks.kafka import KafkaSink

        base: Any = self.inner
        while "inner" in getattr(base, "__dict__", {}):
            base = base.inner  # through wrappers (cardholder profiles)
        if isinstance(base, KafkaSink):
            kafka = base
            if kafka.create_topics:
                from core.kafka.admin import ensure_topics

                ensure_topics(kafka.stack, [self.verdicts_topic])
            return lambda records: kafka.produce(self.verdicts_topic, records)
        if isinstance(base, JsonlSink):
            path = base.directory / "verdicts.jsonl"
            path.write_bytes(b"")

            def append(records: Records) -> None:
                with path.open("ab") as f:
                    f.writelines(v + b"\n" for v in records.values)

            return append

        def keep(records: Records) -> None:
            self.recorded.keys += records.keys
            self.recorded.values += records.values
            self.recorded.timestamps += records.timestamps

        return keep

    def _flush_verdicts(self) -> None:
        with self._lock:
            ready, self._pending_verdicts = self._pending_verdicts, Records()
        if len(ready) and self._verdict_out is not None:
            self._verdict_out(ready)

    def write(self, events: Records, truth: Records) -> None:
        assert self._pool is not None, "open() first"
        sent_at = time.time()  # the engine paces its writes: this is the intended send time
        keys = events.keys or [b""] * len(events.values)
        for key, body in zip(keys, events.values, strict=True):
            self._slots.acquire()  # at most `concurrency` in flight: backpressure
            with self._lock:
                self._in_flight += 1
                self._sent += 1
            self._pool.submit(self._post, body, key, sent_at, self._target(key))
        self.inner.write(Records(), truth)
        self._flush_verdicts()

    def _target(self, key: bytes | str) -> str:
        """The instance this request goes to (see `affinity`)."""
        if len(self.urls) == 1:
            url = self.urls[0]
        elif self.affinity == "token":
            url = route(key, self.urls)
        else:
            url = self.urls[next(self._turns) % len(self.urls)]
        with self._lock:
            self._per_url[url] += 1
        return url

    def _post(
        self,
        body: bytes,
        key: bytes | str = b"",
        sent_at: float | None = None,
        url: str | None = None,
    ) -> None:
        sent_at = time.time() if sent_at is None else sent_at
        status: int | None = None
        content: bytes | None = None
        error: BaseException | None = None
        attempts = 0
        stand_in: str | None = None
        try:
            status, content, error, attempts = self._attempts(body, url or self.urls[0])
            if status == 429:
                stand_in = self._stand_in_decision(body)
        except Exception as exc:  # never lose a request silently, whatever went wrong
            error = exc
            self._fail(f"{type(exc).__name__}: {exc}", None)
        finally:
            try:
                self._log_verdict(body, key, status, content, error, sent_at, attempts, stand_in)
            finally:
                with self._lock:
                    self._in_flight -= 1
                self._slots.release()

    def _log_verdict(
        self,
        body: bytes,
        key: bytes | str,
        status: int | None,
        content: bytes | None,
        error: BaseException | None,
        sent_at: float,
        attempts: int,
        stand_in: str | None = None,
    ) -> None:
        token = key.decode() if isinstance(key, bytes) else str(key)
        record = verdict_record(
            transaction_id(body),
            token,
            status=status,
            content=content,
            sent_at_s=sent_at,
            answered_at_s=time.time(),
            attempts=max(1, attempts),
            exc=error if status is None else None,
            stand_in=stand_in,
        )
        value = orjson.dumps(record)
        with self._lock:
            self._pending_verdicts.keys.append(token.encode())
            self._pending_verdicts.values.append(value)
            self._pending_verdicts.timestamps.append(record["answered_at"])

    def _attempts(
        self, body: bytes, url: str
    ) -> tuple[int | None, bytes | None, BaseException | None, int]:
        """Send with retries: (last status, its body, the last error, requests sent)."""
        assert self._client is not None
        for attempt in range(self.retries + 1):
            started = time.perf_counter()
            try:
                response = self._client.post(url, content=body)
            except httpx.HTTPError as exc:
                if attempt < self.retries:
                    self._retry(attempt)
                    continue
                self._fail(f"{type(exc).__name__}: {exc}", None)
                return None, None, exc, attempt + 1
            micros = max(1, int((time.perf_counter() - started) * 1e6))
            status = response.status_code
            if status == 429 and attempt < self.retries:
                self._retry(attempt, retry_after(response))
                continue
            if status >= 500 and attempt < self.retries:
                self._retry(attempt)
                continue
            self._record(status, response.content, micros)
            return status, response.content, None, attempt + 1
        raise AssertionError("unreachable: the last attempt returns")

    def _retry(self, attempt: int, after_s: float | None = None) -> None:
        """Back off before retry `attempt + 1`; a shed request (`after_s`: its Retry-After)
        waits at least that long, at most `MAX_RETRY_AFTER_S`."""
        backoff = BACKOFF_S * (2**attempt)
        with self._lock:
            self._retried += 1
            if after_s is not None:
                self._shed_retries += 1
                backoff = max(backoff, min(after_s, MAX_RETRY_AFTER_S))
        time.sleep(backoff)

    def _stand_in_decision(self, body: bytes) -> str:
        """What the terminal decides by itself when the endpoint shed every attempt."""
        try:
            amount = float(orjson.loads(body).get("amount"))
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
            amount = float("inf")
        decision = "approve" if amount <= STAND_IN_FLOOR else "decline"
        with self._lock:
            self._stand_in[decision] += 1
        return decision

    def _record(self, status: int, content: bytes, micros: int) -> None:
        decision = None
        if 200 <= status < 300:
            try:
                decision = orjson.loads(content).get("decision")
            except (orjson.JSONDecodeError, AttributeError):
                decision = None
        with self._lock:
            self._status[str(status)] += 1
            self._latency.record_value(min(micros, 60_000_000))
            if 200 <= status < 300:
                self._ok += 1
                self._decisions[str(decision)] += 1
                return
        self._fail(f"HTTP {status}", content)

    def _fail(self, reason: str, content: bytes | None) -> None:
        with self._lock:
            self._failed += 1
            self._errors[reason] += 1
            if len(self._samples) < MAX_ERRORS_KEPT and content is not None:
                # Scrubbed before the cut: a cut PAN would no longer look like one.
                text = scrub_text(content[:65_536].decode(errors="replace"))[:500]
                self._samples.append(f"{reason}: {text}")

    def pending(self) -> int:
        with self._lock:
            in_flight = self._in_flight
        return in_flight + self.inner.pending()

    def close(self) -> SinkReport:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._flush_verdicts()
        if self._client is not None:
            self._client.close()
            self._client = None
        report = self.inner.close()
        errors = [f"{self.url}: {reason} ({n:,} requests)" for reason, n in self._errors.items()]
        return SinkReport(
            written=report.written + self._ok,
            failed=report.failed + self._failed,
            errors=report.errors + errors + self._samples,
            backpressure_waits=report.backpressure_waits,
            details={**report.details, "http": self.stats()},
        )

    def stats(self) -> dict[str, Any]:
        """What happened to the requests so far (the run summary's `http` key)."""
        with self._lock:
            h = self._latency
            latency = (
                {
                    "p50": round(h.get_value_at_percentile(50) / 1000, 3),
                    "p99": round(h.get_value_at_percentile(99) / 1000, 3),
                    "max": round(h.get_max_value() / 1000, 3),
                }
                if h.get_total_count()
                else {}
            )
            return {
                "url": self.url,
                "affinity": self.affinity if len(self.urls) > 1 else None,
                "instances": dict(self._per_url) if len(self.urls) > 1 else None,
                "requests": self._sent,
                "ok": self._ok,
                "failed": self._failed,
                "retried": self._retried,
                "shed_retries": self._shed_retries,
                "stand_in": dict(sorted(self._stand_in.items())),
                "status": dict(sorted(self._status.items())),
                "decisions": dict(sorted(self._decisions.items())),
                "latency_ms": latency,
            }
