"""Request counters and the handling-time histogram of POST /v1/transactions.

`LatencyMiddleware` is a plain ASGI middleware (no per-request task or body copy): it times
each transactions request from the moment the app gets it to the moment the response has been
handed to the server, and records microseconds in an HdrHistogram (1 us .. 60 s, 3 significant
digits). Everything runs on the event loop thread, so no lock is needed.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from hdrh.histogram import HdrHistogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TRANSACTIONS_PATH = "/v1/transactions"


class RequestStats:
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.histogram = HdrHistogram(1, 60_000_000, 3)
        self.reset()

    def reset(self) -> None:
        self.histogram.reset()
        self.requests = 0
        self.rejected = 0
        self.errors = 0
        self.replays = 0
        self.shed = 0  # 429s of the load shedder (`api.fraud.shedding`), not in `requests`
        self.decisions: Counter[str] = Counter({"approve": 0, "review": 0, "decline": 0})

    def record(self, elapsed_ns: int, status: int) -> None:
        self.requests += 1
        if status == 422:
            self.rejected += 1
        elif status >= 500:
            self.errors += 1
        self.histogram.record_value(max(1, elapsed_ns // 1000))

    def latency_ms(self) -> dict[str, Any]:
        h = self.histogram
        count = h.get_total_count()

        def at(percentile: float) -> float | None:
            return round(h.get_value_at_percentile(percentile) / 1000, 3) if count else None

        return {
            "count": count,
            "p50": at(50),
            "p90": at(90),
            "p99": at(99),
            "p999": at(99.9),
            "max": round(h.get_max_value() / 1000, 3) if count else None,
        }

    def uptime_s(self) -> float:
        return round(time.monotonic() - self.started, 3)


class LatencyMiddleware:
    def __init__(self, app: ASGIApp, stats: RequestStats) -> None:
        self.app = app
        self.stats = stats

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != TRANSACTIONS_PATH:
            await self.app(scope, receive, send)
            return
        start = time.perf_counter_ns()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            self.stats.record(time.perf_counter_ns() - start, status)
