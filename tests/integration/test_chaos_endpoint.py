"""`streamsim chaos --fault endpoint`: the fraud endpoint gets kill -9 under a seeded card
stream and is restarted. Its state comes back from `cards.activity`: every decision that
reached the topic is answered again byte for byte; every 200 since the restart is in the
topic once; and, under the default durability (`ack` or `log`: the endpoint answers once the
decision is acknowledged by the broker, or in its write-ahead log), not one decision answered
200 is lost to the kill."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from api.fraud.publisher import LINGER_MS
from api.fraud.settings import ApiSettings
from streamsim.chaos.endpoint import LOSS_WINDOW_S
from tests.integration.chaos_cli import chaos_timeout, processes_mentioning, run_chaos

pytestmark = pytest.mark.integration
TIMEOUT_S = 900


@chaos_timeout(TIMEOUT_S)
def test_chaos_endpoint_kill_keeps_verdicts_and_acknowledged_decisions(tmp_path: Path) -> None:
    requests = 4_000
    report, done = run_chaos(
        tmp_path,
        "cards",
        "endpoint",
        ["--events", str(requests), "--outage-s", "1"],
        TIMEOUT_S,
    )
    assert report["sent"] == requests
    killed = re.search(
        r"killed after (\d+) answers .*?; (\d+) acknowledged decisions missing from "
        r"cards.activity after the kill, answered at most (\d+) ms before it",
        done.stderr,
    )
    assert killed, done.stderr[-3000:]
    answered, lost, max_age_ms = (int(g) for g in killed.groups())
    assert answered >= requests // 2
    default = ApiSettings().durability
    assert default in ("ack", "log") and f"durability: {default}" in done.stderr
    assert report["lost"] == lost == 0 and max_age_ms == 0  # not one answered decision lost
    assert LOSS_WINDOW_S < LINGER_MS / 1000 + 0.5  # what `--durability none` may lose
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
