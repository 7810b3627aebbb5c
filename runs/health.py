"""Whether a child HTTP server answers: the fraud endpoint's `/v1/health`, checked once (a
supervisor's poll) or waited for (a caller that needs it up before going on)."""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path

import httpx

from core.errors import StreamsimError

HEALTH_PATH = "/v1/health"


def answers(url: str, timeout_s: float = 1.0) -> bool:
    """Whether `GET url` answers 200 within `timeout_s`."""
    try:
        return httpx.get(url, timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


def endpoint_healthy(url: str) -> bool:
    """Whether the endpoint at `url` (its base) answers `/v1/health` with 200."""
    return answers(f"{url}{HEALTH_PATH}")


def wait_healthy(
    proc: subprocess.Popen[bytes],
    url: str,
    log: Path,
    *,
    name: str = "the fraud endpoint",
    timeout_s: float = 90.0,
    poll_s: float = 0.5,
) -> None:
    """Until `GET url` answers 200; `StreamsimError` with the log's end if `proc` exits first,
    or naming the URL after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise StreamsimError(f"{name} exited while starting:\n{log.read_text()[-2000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(poll_s)
    raise StreamsimError(f"{name} did not answer {url} within {timeout_s:.0f}s")
