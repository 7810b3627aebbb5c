"""Run the app under uvicorn: one worker, uvloop and httptools, PAN-scrubbed logs.

Ctrl-C (SIGINT) or SIGTERM shuts down cleanly: uvicorn stops accepting, finishes in-flight
requests, then the app's lifespan stops the updater and flushes the producer.

`reuse_port`: the listening socket is bound with SO_REUSEPORT, so several endpoint processes
(`streamsim api --service fraud --instances N`, each its own interpreter and core) share one
port; the kernel spreads new connections over them by a hash of the connection's addresses
(no card affinity: each instance keeps its state current from `cards.activity`).

Each of them also listens alone on `instance_port(port, i)` (api.port + 1 + i), so a client
that routes each card to one instance (the POS sink's `domain.endpoint.urls` with
`affinity: token`, as a card network routes a BIN range to one processor) can address it.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path
from typing import Any

import uvicorn

from api.fraud.service import FraudService
from api.logscrub import log_config
from api.main import Services, app_from_config
from core.config import StackConfig
from core.errors import StreamsimError
from core.ports import port_in_use


def uvicorn_config(
    app: Any, host: str, port: int, access_log: bool, log_level: str
) -> uvicorn.Config:
    """The server settings every streamsim HTTP app runs with (and `bench api`'s reference)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        workers=1,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        log_config=log_config(access_log, log_level.upper()),
        access_log=access_log,
        timeout_graceful_shutdown=10,
    )


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port that other processes may bind too (SO_REUSEPORT)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def instance_port(port: int, instance: int) -> int:
    """The port instance `instance` (0-based) of `--instances N` listens on alone."""
    return port + 1 + instance


def serve(
    stack: StackConfig,
    settings_file: str | Path | None = None,
    *,
    access_log: bool = True,
    log_level: str = "info",
    services: Services = "all",
    instance: int | None = None,
) -> FraudService:
    """Serve until interrupted; returns the service (for its final counters). `instance`:
    one of several endpoint processes on the port (SO_REUSEPORT; `reuse_port_socket`)."""
    host, port = stack.api.host, stack.api.port
    if instance is None and port_in_use(host, port):
        raise StreamsimError(
            f"port {port} on {host} is taken: stop what uses it, or set api.port in the stack "
            "config (or STREAMSIM_API_PORT)"
        )
    app = app_from_config(stack, settings_file, services=services, instance=instance)
    server = uvicorn.Server(uvicorn_config(app, host, port, access_log, log_level))
    sockets = None
    if instance is not None:
        own = instance_port(port, instance)
        sockets = [reuse_port_socket(host, port), reuse_port_socket(host, own)]
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the Ctrl-C it handled
        server.run(sockets=sockets)
    if not server.started:
        raise StreamsimError("the API did not start; see the log lines above")
    service: FraudService = app.state.service
    return service
