"""`streamsim chaos --fault driver`: card-velocity's Spark driver (Python and JVM) gets kill -9
while a batch runs, with the simulator producing; restarted from its checkpoint it drains the
input, and its alerts topic and Parquet lake each hold every alert of an uninterrupted run of
the same input exactly once."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.integration

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


def test_chaos_driver_kill_loses_and_duplicates_no_alert(tmp_path: Path) -> None:
    stack = tmp_path / "stack.yaml"
    stack.write_text(
        yaml.safe_dump(
            {
                "kafka": {"local": {"heap": "384m"}},
                "dirs": {"cache": str(REPO_ROOT / ".cache"), "data": str(tmp_path)},
            }
        )
    )
    events = 12_000
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "streamsim",
            "chaos",
            "card_velocity",
            "--fault",
            "driver",
            "--events",
            str(events),
            "--entities",
            "2000",
            "--speed",
            "300",
            "--outage-s",
            "2",
            "--config",
            str(stack),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=1500,
        check=False,
    )
    assert done.stdout.strip(), done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(report, done.stderr[-2000:])
    assert list(report) == KEYS
    assert report["scenario"] == "card_velocity" and report["fault"] == "driver"
    assert report["sent"] == events
    assert re.search(r"killed the driver while batch [1-9]\d* ran", done.stderr), done.stderr
    compared = re.search(
        r"uninterrupted run: (\d+) alerts \((\d+) in its topic, (\d+)", done.stderr
    )
    assert compared, done.stderr[-3000:]
    alerts, in_topic, in_lake = (int(g) for g in compared.groups())
    assert alerts > 0 and in_topic == in_lake == alerts
    assert f"faulted run: {alerts} in the topic, {alerts} in the lake" in done.stderr
    assert report["lost"] == 0
    assert report["duplicate_alert_ids"] == 0
    assert report["unexpected_duplicates"] == 0
    assert report["recovery_s"] > 2  # it stayed down for --outage-s, then re-ran the batch
    assert report["ok"] is True and done.returncode == 0
    assert not any(p.name.startswith("chaos-") for p in tmp_path.iterdir())  # cleaned up
    assert processes_mentioning(str(tmp_path)) == []  # no driver, JVM or broker left behind
