"""`streamsim chaos --fault broker|broker-of-3`: a broker gets kill -9 mid-simulation and is
restarted; every event truth says was sent is in the topic, exactly as often as truth says."""

from __future__ import annotations

import json
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


@pytest.mark.parametrize("fault", ["broker", "broker-of-3"])
def test_chaos_broker_kill_loses_nothing(fault: str, tmp_path: Path) -> None:
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
            "sensor_fleet",
            "--fault",
            fault,
            "--events",
            str(events),
            "--outage-s",
            "3",
            "--config",
            str(stack),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=600,
        check=False,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert list(report) == KEYS
    assert report["scenario"] == "sensor_fleet" and report["fault"] == fault
    assert report["sent"] == events
    assert report["lost"] == 0, done.stderr[-3000:]
    assert report["unexpected_duplicates"] == 0
    assert report["duplicate_alert_ids"] == 0
    assert report["recovery_s"] > 0
    assert report["ok"] is True and done.returncode == 0
    # the simulator did not crash: it saw the outage (single broker) and said so
    if fault == "broker":
        assert "Kafka unreachable" in done.stderr
        assert report["recovery_s"] >= 3  # no write could succeed while the only broker was down
    assert not any(p.name.startswith("chaos-") for p in tmp_path.iterdir())  # cleaned up
