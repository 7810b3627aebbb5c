"""Load shedding: a bound on the transactions one instance holds, answered 429 past it.

`LoadShedder` is the outermost ASGI middleware of the app (`api.main`). It counts the POST
/v1/transactions requests the app holds (being handled, or waiting for their record's
acknowledgement under `durability: ack`, or for the write-ahead log's fsync under `log`). At
`settings.max_in_flight` a new one is answered at once: 429, `Retry-After:
settings.retry_after_s`, and a body like the other errors' (`{"detail": ...}`), before its
body is read or anything decided. A shed request is counted (`/v1/stats` `shed`), not timed.

What it bounds: the work the app has accepted. Requests still in the kernel's accept queue or
in a connection's buffer are not seen; with `durability: none` each request is handled in one
step of the event loop, so the bound then rarely binds and overload shows as queueing in
front of the app instead.
"""

from __future__ import annotations

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from api.fraud.stats import TRANSACTIONS_PATH, RequestStats


class LoadShedder:
    def __init__(
        self, app: ASGIApp, stats: RequestStats, limit: int | None, retry_after_s: int
    ) -> None:
        self.app = app
        self.stats = stats
        self.limit = limit
        self.in_flight = 0
        self._headers = [
            (b"content-type", b"application/json"),
            (b"retry-after", str(retry_after_s).encode()),
        ]
        self._body = orjson.dumps(
            {"detail": f"overloaded: {limit} transactions in flight; retry after {retry_after_s} s"}
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.limit is None or scope["type"] != "http" or scope["path"] != TRANSACTIONS_PATH:
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            self.stats.shed += 1
            body = self._body
            headers = [(b"content-length", b"%d" % len(body)), *self._headers]
            await send({"type": "http.response.start", "status": 429, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
