"""Run the app under uvicorn: one worker, uvloop and httptools, PAN-scrubbed logs.

Ctrl-C (SIGINT) or SIGTERM shuts down cleanly: uvicorn stops accepting, finishes in-flight
requests, then the app's lifespan stops the updater and flushes the producer.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import uvicorn

from api.fraud.service import FraudService
from api.logscrub import log_config
from api.main import app_from_config
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


def serve(
    stack: StackConfig,
    settings_file: str | Path | None = None,
    *,
    access_log: bool = True,
    log_level: str = "info",
) -> FraudService:
    """Serve until interrupted; returns the service (for its final counters)."""
    host, port = stack.api.host, stack.api.port
    if port_in_use(host, port):
        raise StreamsimError(
            f"port {port} on {host} is taken: stop what uses it, or set api.port in the stack "
            "config (or STREAMSIM_API_PORT)"
        )
    app = app_from_config(stack, settings_file)
    server = uvicorn.Server(uvicorn_config(app, host, port, access_log, log_level))
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the Ctrl-C it handled
        server.run()
    if not server.started:
        raise StreamsimError("the API did not start; see the log lines above")
    service: FraudService = app.state.service
    return service
