"""A keep-alive HTTP/1.1 client connection for load generation: pre-built request bytes out,
responses parsed by httptools (the C parser uvicorn uses), one request at a time.

Why not httpx or aiohttp: both cost far more client CPU per request than this connection on
uvloop (httpx's AsyncClient more than the fraud endpoint spends answering; figures in the
CHANGELOG). A generator that needs more CPU than the server it loads measures itself.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any, cast
from urllib.parse import urlsplit

import httptools

DECISION = b'"decision":"'


def request_head(url: str, path: str, headers: dict[str, str] | None = None) -> bytes:
    """The request line and fixed headers of a JSON POST, up to (not including) Content-Length."""
    host = urlsplit(url).netloc
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n").encode("latin-1")


def post_request(head: bytes, body: bytes) -> bytes:
    return b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body)


def host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 80


class Connection(asyncio.Protocol):
    """One connection. `on_response(conn, status, decision, keep_alive)` fires per response;
    `on_lost(conn, exc)` when the connection closes for any reason."""

    def __init__(
        self,
        on_response: Callable[[Connection, int, bytes | None, bool], None],
        on_lost: Callable[[Connection, Exception | None], None],
        read_decision: bool = False,
    ) -> None:
        self.on_response = on_response
        self.on_lost = on_lost
        self.read_decision = read_decision
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.slot = -1  # the request in flight on this connection; -1: idle
        self.sent_at = 0.0
        self.closed = False
        self._body: list[bytes] = []

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.abort()
            self.on_lost(self, exc)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self.closed = True
            self.on_lost(self, exc)

    # httptools callbacks
    def on_body(self, body: bytes) -> None:
        if self.read_decision:
            self._body.append(body)

    def on_message_complete(self) -> None:
        status = self.parser.get_status_code()
        keep_alive = self.parser.should_keep_alive()
        decision = None
        if self._body:
            body = b"".join(self._body)
            self._body.clear()
            at = body.find(DECISION)
            if at >= 0:
                start = at + len(DECISION)
                decision = body[start : body.find(b'"', start)]
        self.on_response(self, status, decision, keep_alive)

    # client side
    def send(self, slot: int, data: bytes, now: float) -> None:
        assert self.transport is not None
        self.slot = slot
        self.sent_at = now
        self.transport.write(data)

    def abort(self) -> None:
        """Close now; pending bytes are dropped (a timed-out request cannot be cancelled on
        HTTP/1.1 otherwise)."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


async def open_connection(host: str, port: int, factory: Callable[[], Connection]) -> Connection:
    loop = asyncio.get_running_loop()
    _, protocol = await loop.create_connection(factory, host, port)
    return protocol


def describe(exc: Any) -> str:
    return f"{type(exc).__name__}: {exc}" if exc else "closed by the server"
