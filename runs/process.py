"""Child processes in process groups of their own: started so that stopping one kills all it
started (a Spark driver's JVM, uvicorn's workers), and Ctrl-C on the parent's terminal stays
the parent's."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

Output = int | IO[Any] | None


def spawn(
    command: Sequence[str],
    *,
    stdout: Output,
    stderr: Output,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """`command` with no stdin, leading a new process group (its pid is the group's id)."""
    return subprocess.Popen(
        list(command),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        env=None if env is None else dict(env),
        cwd=cwd,
        start_new_session=True,
    )


def kill_group(pgid: int | None, sig: signal.Signals) -> None:
    """`sig` to every process of the group; a group already gone is no error."""
    if pgid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_alive(pgid: int | None) -> bool:
    """Whether any process of the group is still there."""
    if pgid is None:
        return False
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def wait_group_gone(pgid: int | None, timeout_s: float) -> bool:
    """Wait up to `timeout_s` for the rest of a group whose leader has ended; whether it is
    gone."""
    deadline = time.monotonic() + timeout_s
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not group_alive(pgid)


def stop_group(proc: subprocess.Popen[bytes], sig: signal.Signals, grace_s: float) -> None:
    """`sig` to the group `proc` leads; SIGKILL to the group if it has not ended after
    `grace_s`, and to whatever it left behind."""
    kill_group(proc.pid, sig)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5.0)
    wait_group_gone(proc.pid, grace_s)
    kill_group(proc.pid, signal.SIGKILL)


def now_ms() -> int:
    """Epoch milliseconds, as a child's start and end are recorded."""
    return time.time_ns() // 1_000_000
