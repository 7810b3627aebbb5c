"""The panel fixture's `start_ui` retries a port another process took before Streamlit bound
it (CI once failed with "Port N is not available")."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration import ui_stack

pytestmark = pytest.mark.integration  # a real `streamlit run`


def test_a_taken_port_is_retried_on_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = int(taken.getsockname()[1])
        ports: Iterator[int] = iter([busy, ui_stack.free_port()])
        monkeypatch.setattr(ui_stack, "free_port", lambda: next(ports))
        log = tmp_path / "ui.log"
        ui, url = ui_stack.start_ui({**os.environ, "STREAMSIM_API_URL": "http://127.0.0.1:9"}, log)
        try:
            assert f"Port {busy} is not available" in log.read_text()
            assert not url.endswith(f":{busy}")
            assert httpx.get(f"{url}/_stcore/health", timeout=5).status_code == 200
        finally:
            ui_stack.stop(ui)
