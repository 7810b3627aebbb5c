"""`streamsim chaos --fault endpoint`: the fraud endpoint gets kill -9 under a seeded card
stream and is restarted. Its state comes back from `cards.activity`: every decision that
reached the topic is answered again byte for byte; every 200 since the restart is in the
topic once; and the only acknowledged decisions a kill can lose are those answered within the
publish linger's window before it (the endpoint answers before the broker acknowledges)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from api.fraud.publisher import LINGER_MS
from streamsim.chaos.endpoint import LOSS_WINDOW_S
from tests.conftest import REPO_ROOT
from tests.integration.test_chaos_driver import KEYS, processes_mentioning

pytestmark = pytest.mark.integration


def test_chaos_endpoint_kill_keeps_verdicts_and_acknowledged_decisions(tmp_path: Path) -> None:
    stack = tmp_path / "stack.yaml"
    stack.write_text(
        yaml.safe_dump(
            {
                "kafka": {"local": {"heap": "384m"}},
                "dirs": {"cache": str(REPO_ROOT / ".cache"), "data": str(tmp_path)},
            }
        )
    )
    requests = 4_000
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "streamsim",
            "chaos",
            "card_velocity",
            "--fault",
            "endpoint",
            "--events",
            str(requests),
            "--outage-s",
            "1",
            "--config",
            str(stack),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=900,
        check=False,
    )
    assert done.stdout.strip(), done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(report, done.stderr[-2000:])
    assert list(report) == KEYS
    assert report["scenario"] == "card_velocity" and report["fault"] == "endpoint"
    assert report["sent"] == requests
    killed = re.search(
        r"killed after (\d+) answers .*?; (\d+) acknowledged decisions missing from "
        r"cards.activity after the kill, answered at most (\d+) ms before it",
        done.stderr,
    )
    assert killed, done.stderr[-3000:]
    answered, lost, max_age_ms = (int(g) for g in killed.groups())
    assert answered >= requests // 2
    # What a kill -9 can lose: decisions answered within the linger (+ the send) before it.
    assert report["lost"] == lost <= answered
    assert max_age_ms <= LOSS_WINDOW_S * 1000
    assert LOSS_WINDOW_S < LINGER_MS / 1000 + 0.5
    replayed = re.search(
        r"replayed (\d+) decisions in the topic: (\d+) answered differently", done.stderr
    )
    assert replayed, done.stderr[-3000:]
    assert int(replayed.group(1)) == answered - lost  # every surviving decision was replayed
    assert int(replayed.group(2)) == 0  # and answered byte for byte as before the kill
    assert f"the {lost} lost ones were decided again" in done.stderr
    assert "after the restart are not in" not in done.stderr
    assert "the restarted endpoint exited" not in done.stderr  # Ctrl-C: a clean stop, flushed
    assert "responses other than 200" not in done.stderr
    assert report["unexpected_duplicates"] == 0  # no decision published twice
    assert report["duplicate_alert_ids"] == 0
    assert report["recovery_s"] > 1
    assert report["ok"] is True and done.returncode == 0
    assert not any(p.name.startswith("chaos-") for p in tmp_path.iterdir())
    assert processes_mentioning(str(tmp_path)) == []
