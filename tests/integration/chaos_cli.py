"""Runs `streamsim chaos` as a user would, on a private broker, for the chaos tests."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO_ROOT

#: The keys of `streamsim chaos --json`, in order (docs/design.md).
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
#: After its timeout, `streamsim chaos` gets a Ctrl-C and this long to stop its brokers and jobs.
GRACE_S = 60.0


def chaos_timeout(timeout_s: float) -> pytest.MarkDecorator:
    """The test's pytest timeout: past `run_chaos`'s `timeout_s` and the grace after it, so the
    subprocess's timeout fires first, with its stderr."""
    return pytest.mark.timeout(timeout_s + GRACE_S + 60)


def small_card_scenario(tmp_path: Path, entities: int = 500, fraud_scale: float = 10.0) -> str:
    """The card scenario with `entities` cards and every fraud rate times `fraud_scale`, as
    `tmp_path/cards.yaml` (still named cards): few events span the hours the jobs' 2-hour
    watermark needs and still raise alerts (support over seeds: the tests' commit bodies)."""
    data = yaml.safe_load((REPO_ROOT / "config/scenarios/cards.yaml").read_text())
    data["entities"] = entities
    for fraud in data["domain"]["fraud"].values():
        fraud["rate_per_1k_card_hours"] *= fraud_scale
    path = tmp_path / "cards.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


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
    done = _run([*command, "--config", str(stack), "--json"], timeout_s)
    assert done.stdout.strip(), done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(report, done.stderr[-2000:])
    assert list(report) == KEYS
    assert report["scenario"] == Path(scenario).stem and report["fault"] == fault
    return report, done


def _run(command: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """`command` run to its end; past `timeout_s`, stopped (Ctrl-C, then kill -9 after
    `GRACE_S`) and the test failed with the tail of its stderr."""
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)  # its cleanup stops the private brokers and jobs
            try:
                _, err = proc.communicate(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                err = f"(it did not stop within {GRACE_S:.0f}s of a Ctrl-C: killed)"
            ran = " ".join(command[2:7])
            pytest.fail(f"`{ran}` still ran after {timeout_s:.0f}s; its stderr:\n{err[-3000:]}")
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


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
