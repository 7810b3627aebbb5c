"""Run a command as a child process and measure its own peak RSS (the kernel's rusage)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass


@dataclass(frozen=True)
class ChildRun:
    returncode: int
    stdout: str
    stderr: str
    peak_rss_mb: float


def run_measured(command: list[str], env: dict[str, str] | None = None) -> ChildRun:
    """Like subprocess.run, plus this child's peak resident set size (wait4's ru_maxrss).

    Linux keeps the pre-exec image's peak in ru_maxrss, so the figure is at least this (small)
    process's own size at the time of the spawn.
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(command, stdout=out, stderr=err, env=env, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return ChildRun(proc.returncode, out.read(), err.read(), usage.ru_maxrss / 1024)
