"""`streamsim ui`: the Streamlit command it runs, and a clear error when the port is taken."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from typer.testing import CliRunner

from core.config import StackConfig
from streamsim.cli import app
from streamsim.cli.ui import APP, api_url_of, streamlit_command


def test_streamlit_runs_headless_on_the_stacks_ui_port() -> None:
    stack = StackConfig.model_validate(
        {"ui": {"port": 9501}, "api": {"host": "0.0.0.0", "port": 8000}}
    )
    command = streamlit_command(stack)
    assert command[:5] == [sys.executable, "-m", "streamlit", "run", str(APP)]
    options = dict(zip(command[5::2], command[6::2], strict=True))
    assert options["--server.headless"] == "true"
    assert options["--server.port"] == "9501" and options["--server.address"] == "127.0.0.1"
    assert options["--browser.gatherUsageStats"] == "false"
    assert APP.exists()
    assert api_url_of(stack) == "http://127.0.0.1:8000"  # a wildcard listen address is local


def test_a_taken_port_is_named(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        stack_file = tmp_path / "stack.yaml"
        stack_file.write_text(f"ui:\n  port: {port}\n")
        result = CliRunner().invoke(app, ["ui", "--config", str(stack_file)])
    assert result.exit_code != 0
    assert f"port {port}" in str(result.exception) or f"port {port}" in result.output
