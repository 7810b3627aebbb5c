"""`streamsim ui`: the Streamlit control panel, headless on the stack's ui.host/ui.port, pointed
at the API (api.host/api.port, or --api-url)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from core.config import StackConfig
from core.errors import StreamsimError
from streamsim.cli.common import ConfigOpt, JsonOpt, console, emit, stack_from

APP = Path(__file__).resolve().parents[2] / "ui" / "app.py"
API_URL_ENV = "STREAMSIM_API_URL"


def api_url_of(stack: StackConfig) -> str:
    host = "127.0.0.1" if stack.api.host in ("0.0.0.0", "::") else stack.api.host
    return f"http://{host}:{stack.api.port}"


def streamlit_command(stack: StackConfig, app: Path = APP) -> list[str]:
    """`streamlit run` headless on ui.host:ui.port, no usage stats, no file watcher."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app),
        "--server.headless",
        "true",
        "--server.address",
        stack.ui.host,
        "--server.port",
        str(stack.ui.port),
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "minimal",
    ]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def ui(
    config: ConfigOpt = None,
    api_url: Annotated[
        str | None,
        typer.Option(
            "--api-url", help="The API the panel talks to. Default: the stack's api.host/port."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Start the control panel until Ctrl-C.

    It reads everything through the API (start it with `streamsim api`); starting and stopping
    runs needs STREAMSIM_API_TOKEN in the environment, the same token the API has.
    """
    from core.ports import port_in_use

    stack = stack_from(config)
    url = f"http://{stack.ui.host}:{stack.ui.port}"
    if port_in_use(stack.ui.host, stack.ui.port):
        raise StreamsimError(
            f"port {stack.ui.port} on {stack.ui.host} is taken: stop what uses it, or set "
            "ui.port in the stack config (or STREAMSIM_UI_PORT)"
        )
    target = api_url or api_url_of(stack)
    env = {**os.environ, API_URL_ENV: target}
    if not as_json:
        token = "with" if env.get("STREAMSIM_API_TOKEN") else "without (read-only)"
        console.print(
            f"control panel on {url}, API {target}, {token} control token; Ctrl-C stops",
            highlight=False,
        )
    proc = subprocess.Popen(streamlit_command(stack), env=env)
    signal.signal(signal.SIGTERM, _interrupt)  # a stopped `streamsim ui` stops Streamlit too
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGTERM)  # Streamlit shuts down on it (SIGINT may be ignored)
        try:
            code = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
    emit(
        {"url": url, "api_url": target, "exit_code": code},
        as_json,
        f"control panel stopped (exit code {code})",
    )
