"""Runs `streamsim chaos` as a user would, on a private broker, for the chaos tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO_ROOT

#: The keys of `streamsim chaos --json`, in order (DESIGN.md).
KEYS = [
    "scenario",
    "fault",
    "sent",
    "lost",
    "unexpected_duplicates",
    "duplicate_alert_ids",
    "recovery_s",
    "ok",
]


def run_chaos(
    tmp_path: Path, scenario: str, fault: str, args: list[str], timeout_s: float
) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """`streamsim chaos SCENARIO --fault FAULT ARGS --json` with its data under `tmp_path`:
    the JSON report (its shape checked) and the finished process."""
    stack = tmp_path / "stack.yaml"
    stack.write_text(
        yaml.safe_dump(
            {
                "kafka": {"local": {"heap": "384m"}},
                "dirs": {"cache": str(REPO_ROOT / ".cache"), "data": str(tmp_path)},
            }
        )
    )
    command = [sys.executable, "-m", "streamsim", "chaos", scenario, "--fault", fault, *args]
    done = subprocess.run(
        [*command, "--config", str(stack), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=timeout_s,
        check=False,
    )
    assert done.stdout.strip(), done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(report, done.stderr[-2000:])
    assert list(report) == KEYS
    assert report["scenario"] == scenario and report["fault"] == fault
    return report, done


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention `text` (a leftover JVM or driver)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            line = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in line:
            found.append(line)
    return found
