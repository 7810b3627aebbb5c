"""`streamsim chaos --fault driver`: cards's Spark driver (Python and JVM) gets kill -9
while a batch runs, with the simulator producing; restarted from its checkpoint it drains the
input, and its alerts topic and Parquet lake each hold every alert of an uninterrupted run of
the same input exactly once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.integration.chaos_cli import (
    chaos_timeout,
    processes_mentioning,
    run_chaos,
    small_card_scenario,
)

pytestmark = pytest.mark.integration
TIMEOUT_S = 1500


@chaos_timeout(TIMEOUT_S)
def test_chaos_driver_kill_loses_and_duplicates_no_alert(tmp_path: Path) -> None:
    # 250 cards with 10x the fraud: 2,000 events span 5.9-6.7 simulated hours over seeds 0-9,
    # so at speed 400 the simulator would send for 53-61 s; the job commits its first batch
    # and starts the next 13-17 s in, the kill (then the rest comes at once). The 2-hour
    # watermark passes 15-27 alerts.
    events = 2_000
    report, done = run_chaos(
        tmp_path,
        small_card_scenario(tmp_path, entities=250),
        "driver",
        ["--events", str(events), "--speed", "400", "--outage-s", "2"],
        TIMEOUT_S,
    )
    assert report["sent"] == events
    killed = re.search(
        r"killed the driver while batch [1-9]\d* ran, \d+s after the simulator started, with "
        r"([\d,]+) of 2,000 events sent",
        done.stderr,
    )
    assert killed, done.stderr[-3000:]
    assert int(killed.group(1).replace(",", "")) < events  # mid-stream: the simulator still sent
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
