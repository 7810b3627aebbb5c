"""`streamsim chaos --fault broker|broker-of-3`: a broker gets kill -9 mid-simulation and is
restarted; every event truth says was sent is in the topic, exactly as often as truth says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.chaos_cli import chaos_timeout, run_chaos

pytestmark = pytest.mark.integration
TIMEOUT_S = 600


@chaos_timeout(TIMEOUT_S)
@pytest.mark.parametrize("fault", ["broker", "broker-of-3"])
def test_chaos_broker_kill_loses_nothing(fault: str, tmp_path: Path) -> None:
    events = 12_000
    report, done = run_chaos(
        tmp_path, "sensors", fault, ["--events", str(events), "--outage-s", "3"], TIMEOUT_S
    )
    assert report["sent"] == events
    assert report["lost"] == 0, done.stderr[-3000:]
    assert report["unexpected_duplicates"] == 0
    assert report["duplicate_alert_ids"] == 0
    assert report["recovery_s"] is not None, "no acks=all write succeeded after the kill"
    assert report["ok"] is True and done.returncode == 0
    # the simulator did not crash: it saw the outage (single broker) and said so
    if fault == "broker":
        assert "Kafka unreachable" in done.stderr
        assert report["recovery_s"] >= 3  # no write could succeed while the only broker was down
    assert not any(p.name.startswith("chaos-") for p in tmp_path.iterdir())  # cleaned up
