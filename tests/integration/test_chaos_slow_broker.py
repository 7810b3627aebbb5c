"""`streamsim chaos --fault slow-broker`: Kafka client quotas (set and deleted with Kafka's own
kafka-configs) throttle a private broker while the simulator and the fraud endpoint write to
it. Both say they were throttled and keep going; every event truth says was sent is in the
topic as often as truth says, and every decision answered 200 is in cards.activity once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.integration.chaos_cli import chaos_timeout, processes_mentioning, run_chaos

pytestmark = pytest.mark.integration
TIMEOUT_S = 600


@chaos_timeout(TIMEOUT_S)
def test_chaos_slow_broker_throttles_clients_that_say_so_and_lose_nothing(
    tmp_path: Path,
) -> None:
    events = 3_000
    report, done = run_chaos(
        tmp_path,
        "cards",
        "slow-broker",
        ["--events", str(events), "--entities", "2000", "--outage-s", "6"],
        TIMEOUT_S,
    )
    assert report["sent"] == events
    held = re.search(r"clients throttled to \d+ bytes/s for ([\d.]+)s", done.stderr)
    assert held and float(held.group(1)) >= 6, done.stderr[-3000:]
    assert "warning: Kafka throttles the simulator's producer" in done.stderr
    simulator = re.search(r"the simulator was throttled: (\d+) throttled responses", done.stderr)
    assert simulator and int(simulator.group(1)) > 0, done.stderr[-3000:]
    assert (
        "the endpoint said: " in done.stderr
        and "Kafka throttles the publisher to cards.activity" in done.stderr
    )
    assert f"{events} of {events} requests answered 200; 0 of them are not in cards.activity" in (
        done.stderr
    )
    assert report["lost"] == 0  # drained once the quotas were lifted: every record is in
    assert report["unexpected_duplicates"] == 0
    assert report["duplicate_alert_ids"] == 0
    assert report["ok"] is True and done.returncode == 0
    assert not any(p.name.startswith("chaos-") for p in tmp_path.iterdir())
    assert processes_mentioning(str(tmp_path)) == []
