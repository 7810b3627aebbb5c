"""A server that answers every HTTP/1.1 request with the same canned 200 JSON, on uvloop with
httptools: next to no work per request, so a load generator saturating it shows the
generator's own ceiling (`bench api` reports it as `generator_ceiling_per_s`).

`python -m streamsim.bench.canned_server HOST PORT`
"""

from __future__ import annotations

import asyncio
import signal
import sys

import httptools
import uvloop

BODY = b'{"transaction_id":"bench-00000000-0000000","decision":"approve"}'
RESPONSE = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
    len(BODY),
    BODY,
)


class CannedProtocol(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.parser = httptools.HttpRequestParser(self)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close()

    def on_message_complete(self) -> None:
        self.transport.write(RESPONSE)  # type: ignore[attr-defined]


async def serve(host: str, port: int) -> None:
    """Serve until SIGINT or SIGTERM (handled explicitly: a child started in the background
    inherits an ignored SIGINT)."""
    loop = asyncio.get_running_loop()
    stop = loop.create_future()

    def done() -> None:
        if not stop.done():
            stop.set_result(None)

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, done)
    server = await loop.create_server(CannedProtocol, host, port)
    async with server:
        await stop


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    uvloop.run(serve(host, port))


if __name__ == "__main__":
    main()
