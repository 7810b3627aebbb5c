"""`streamsim chaos --fault lake-full`: cards's Parquet lake becomes a file (unwritable,
even for root) while the simulator produces, then comes back. The job says so on one line
(path and OS error), holds the batch, writes it once the lake is back, and its topic and lake
each hold every alert of an uninterrupted run of the same input exactly once."""

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
TIMEOUT_S = 900


@chaos_timeout(TIMEOUT_S)
def test_chaos_lake_full_holds_the_batch_and_loses_no_alert(tmp_path: Path) -> None:
    # 250 cards with 10x the fraud: the 2-hour watermark passes 15-27 alerts of 2,000 events
    # over seeds 0-9 (the first of them is the batch the blocked lake holds).
    events = 2_000
    report, done = run_chaos(
        tmp_path,
        small_card_scenario(tmp_path, entities=250),
        "lake-full",
        ["--events", str(events), "--speed", "max", "--outage-s", "3"],
        TIMEOUT_S,
    )
    assert report["sent"] == events
    said = re.search(
        r"the job said: cards: alerts lake unwritable: (\S+): ENOTDIR \(Not a directory\);"
        r" batch (\d+) holds its (\d+) alerts",
        done.stderr,
    )
    assert said, done.stderr[-3000:]
    assert "/faulted/lake/alerts/cards/" in said.group(1)
    assert re.search(
        rf"the job said: cards: alerts lake writable again after [\d.]+s: "
        rf"batch {said.group(2)} written to ",
        done.stderr,
    ), done.stderr[-3000:]
    assert "Traceback" not in done.stderr
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
    assert report["recovery_s"] >= 3  # the lake stayed blocked for --outage-s
    assert report["ok"] is True and done.returncode == 0
    assert not any(p.name.startswith("chaos-") for p in tmp_path.iterdir())  # cleaned up
    assert processes_mentioning(str(tmp_path)) == []  # no driver, JVM or broker left behind
