"""`lab watermark` at a small size: one vehicles stream through the real
vehicles job under two watermarks, on the session broker and Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from core.config import StackConfig
from streamsim.lab.watermark import parse_watermarks, save, sweep

pytestmark = pytest.mark.integration

POINT_KEYS = [
    "time",
    "watermark_s",
    "completeness",
    "late_dropped",
    "parity",
    "recall",
    "precision",
    "latency_ms",
]


@pytest.mark.timeout(1800)  # two Spark runs of the whole job; ~10+ min on 2 shared cores
def test_a_longer_watermark_drops_fewer_late_events_and_waits_longer(
    kafka_stack: StackConfig, spark: Any, tmp_path: Path
) -> None:
    report = sweep(
        kafka_stack,
        "vehicles",
        parse_watermarks("0s,10m"),
        events=6000,
        seed=7,
        work=tmp_path / "work",
        max_offsets=1000,
    )
    assert report["scenario"] == "vehicles"
    tight, loose = report["points"]
    for point in (tight, loose):
        assert list(point) == [*POINT_KEYS, "provisional"]
        assert point["time"] == "event_time"  # the default: the device's own clock
        assert set(point["latency_ms"]) == {"p50", "p99"}
        assert 0 <= point["completeness"] <= 1
    assert (tight["watermark_s"], loose["watermark_s"]) == (0, 600)
    # The stream is disordered (delays, dead zones): a zero watermark drops some of it.
    assert tight["late_dropped"] > loose["late_dropped"]
    assert tight["completeness"] < loose["completeness"]
    # Waiting costs time: no window closes within this short stream under a 10-minute
    # watermark (its latency is left out as null). At 1 minute the p50 came out equal to the
    # zero watermark's (60,661 ms both), so a shorter sweep cannot show the wait either; the
    # card sweep below shows it.
    assert tight["latency_ms"]["p50"] is not None and loose["latency_ms"]["p50"] is None
    assert report["processing_time"]["records_in_another_window"] > 0
    # The update-mode stats: every final window had provisional rows first, out earlier.
    provisional = tight["provisional"]
    assert provisional["windows"] > 0 and provisional["without_provisional"] == 0
    assert provisional["latency_ms"]["p50"] < tight["latency_ms"]["p50"]
    assert provisional["corrections"] > 0  # 1-minute windows span batches of 1,000 readings
    files = save(report, tmp_path / "out")
    spec = orjson.loads(files[1].read_bytes())
    assert {row["metric"] for row in spec["data"]["values"]} <= {"completeness", "recall"}
    assert len(spec["data"]["values"]) >= 1


@pytest.mark.timeout(1800)
def test_the_card_job_sweeps_too_with_its_feature_windows_timed(
    kafka_stack: StackConfig, spark: Any, tmp_path: Path
) -> None:
    report = sweep(
        kafka_stack,
        "cards",
        parse_watermarks("0s,2m"),
        events=3000,
        seed=5,
        work=tmp_path / "work",
        max_offsets=500,
    )
    tight, loose = report["points"]
    # The update-mode variant's figures ride beside the contract's keys (the CLI drops them).
    assert [list(p) for p in report["points"]] == [[*POINT_KEYS, "provisional"]] * 2
    # POS terminals' clocks differ by up to a minute: a zero watermark drops some transactions.
    assert tight["late_dropped"] > loose["late_dropped"]
    assert tight["completeness"] < loose["completeness"] <= 1
    assert tight["parity"] is None and loose["parity"] is None  # no oracle for card features
    assert tight["latency_ms"]["p50"] is not None and loose["latency_ms"]["p50"] is not None
    assert loose["latency_ms"]["p50"] > tight["latency_ms"]["p50"]
    for point in (tight, loose):
        provisional = point["provisional"]
        # Every final window had provisional rows first: the variant reads the same batches.
        assert provisional["windows"] > 0 and provisional["without_provisional"] == 0
        assert provisional["provisional_rows"] >= provisional["windows"]
        # A provisional value comes out while the window is open, the final one only once the
        # watermark has passed its end: earlier in stream time at either watermark.
        assert provisional["latency_ms"]["p50"] < point["latency_ms"]["p50"]
