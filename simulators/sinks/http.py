"""Events as HTTP requests: each event record's value is POSTed as a JSON body; truth records go
to another sink (Kafka or JSONL). The card scenario's POS mode uses it: the simulator plays the
terminals and asks the fraud endpoint for a verdict on every transaction.

- Requests leave in the order the engine hands them over (emit order, paced by the engine), on
  a pool of `concurrency` worker threads sharing one keep-alive connection pool; at most
  `concurrency` are in flight, so a slow endpoint slows the simulator instead of growing a
  queue.
- A connection error or a 5xx is retried (`retries` times, short backoff); a repeat is safe
  because the endpoint is idempotent on the transaction id.
- Nothing is dropped silently: every response is counted by status, every request that never
  got a 2xx is counted as failed, and the first few error bodies (422 field errors included) are
  kept for the run summary, PAN-scrubbed.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import orjson
from hdrh.histogram import HdrHistogram

from core.pan import scrub_text
from simulators.sinks.base import Records, Sink, SinkReport, Topics

MAX_ERRORS_KEPT = 5
BACKOFF_S = 0.05


class HttpEventSink:
    def __init__(
        self,
        inner: Sink,
        url: str,
        *,
        concurrency: int = 16,
        timeout_s: float = 10.0,
        retries: int = 2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """`inner` gets the truth records; `transport` is for tests (e.g. httpx.MockTransport)."""
        self.inner = inner
        self.url = url
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
        self._sent = self._ok = self._failed = self._retried = 0
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

    def write(self, events: Records, truth: Records) -> None:
        assert self._pool is not None, "open() first"
        for body in events.values:
            self._slots.acquire()  # at most `concurrency` in flight: backpressure
            with self._lock:
                self._in_flight += 1
                self._sent += 1
            self._pool.submit(self._post, body)
        self.inner.write(Records(), truth)

    def _post(self, body: bytes) -> None:
        try:
            self._attempts(body)
        except Exception as exc:  # never lose a request silently, whatever went wrong
            self._fail(f"{type(exc).__name__}: {exc}", None)
        finally:
            with self._lock:
                self._in_flight -= 1
            self._slots.release()

    def _attempts(self, body: bytes) -> None:
        assert self._client is not None
        for attempt in range(self.retries + 1):
            started = time.perf_counter()
            try:
                response = self._client.post(self.url, content=body)
            except httpx.HTTPError as exc:
                if attempt < self.retries:
                    self._retry(attempt)
                    continue
                self._fail(f"{type(exc).__name__}: {exc}", None)
                return
            micros = max(1, int((time.perf_counter() - started) * 1e6))
            status = response.status_code
            if status >= 500 and attempt < self.retries:
                self._retry(attempt)
                continue
            self._record(status, response.content, micros)
            return

    def _retry(self, attempt: int) -> None:
        with self._lock:
            self._retried += 1
        time.sleep(BACKOFF_S * (2**attempt))

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
                "requests": self._sent,
                "ok": self._ok,
                "failed": self._failed,
                "retried": self._retried,
                "status": dict(sorted(self._status.items())),
                "decisions": dict(sorted(self._decisions.items())),
                "latency_ms": latency,
            }
