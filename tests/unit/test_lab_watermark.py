"""The lab's pure parts: watermark parsing, the processing-time view, result latency, the
replay's watermark model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.errors import StreamsimError
from streamsim.lab.watermark import (
    SCENARIOS,
    Stream,
    batch_watermarks,
    late_watermarks,
    measured,
    on_time,
    parse_watermarks,
    point_config,
    processing_time_view,
    provisional_view,
    result_latencies,
    window_latencies,
    windows_topic,
)
from tests.conftest import REPO_ROOT


def test_parse_watermarks() -> None:
    assert parse_watermarks("0s, 30s,2m,1h") == [
        ("0 seconds", 0),
        ("30 seconds", 30_000),
        ("2 minutes", 120_000),
        ("1 hours", 3_600_000),
    ]
    for bad in ("", "5x", "m", "-1s"):
        with pytest.raises(StreamsimError, match="--watermarks"):
            parse_watermarks(bad)


def test_processing_time_windows_misplace_delayed_records() -> None:
    # Four records stamped in minute 0; two arrive in minute 1 (a backlog flushed late).
    event = np.array([1_000, 2_000, 3_000, 4_000])
    emit = [1_500, 2_500, 61_000, 62_000]
    stream = Stream([b""] * 4, [b"{}"] * 4, emit, pd.DataFrame(), event)
    view = processing_time_view(stream)
    assert view["records_in_another_window"] == 2
    assert view["share_in_another_window"] == 0.5
    assert view["windows"] == 2
    assert view["total_count_error"] == 4  # minute 0: 4 vs 2; minute 1: 0 vs 2
    assert view["worst_window"]["event_time_count"] in (4, 0)


def test_result_latency_is_stream_time_past_the_window_end() -> None:
    batches = [
        {
            "batchId": 0,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "durationMs": {"triggerExecution": 500},
            "eventTime": {"max": "2026-01-01T00:00:50.000Z"},
        },
        {
            "batchId": 1,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "durationMs": {"triggerExecution": 500},
            "eventTime": {"max": "2026-01-01T00:01:40.000Z"},
        },
    ]
    minute_end = 1767225660000  # 2026-01-01T00:01:00Z
    batch_1_ms = 1767225601200  # written while batch 1 ran
    stats = [(batch_1_ms, {"window_end": minute_end}), (batch_1_ms, {"no_window": 1})]
    assert result_latencies(stats, batches) == [40_000.0]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_each_lab_scenario_gets_a_private_copy_of_its_jobs_config(scenario: str) -> None:
    """Both jobs: the watermark and every topic overridden, triggers drained as micro-batches."""
    from core.config import load_model
    from pipeline.config import PipelineConfig
    from scenarios.catalog import ScenarioConfig

    lab_job = SCENARIOS[scenario]
    assert load_model(ScenarioConfig, REPO_ROOT / lab_job.scenario_file).name == scenario
    base = load_model(PipelineConfig, REPO_ROOT / lab_job.pipeline_file)
    assert lab_job.windows_query.startswith(f"{base.job}.")
    cfg = point_config(base, "5 seconds", "lab.in", "t1", 500)
    assert cfg.watermark == "5 seconds" and cfg.input_topics == ["lab.in"]
    assert cfg.max_offsets_per_trigger == 500
    assert (cfg.output_topic, cfg.deadletter_topic) == ("lab.alerts-t1", "lab.deadletter-t1")
    assert windows_topic(cfg).startswith("lab.") and windows_topic(cfg).endswith("-t1")
    assert windows_topic(cfg) != windows_topic(base)
    # The update-mode variant runs beside the windowed query, in the lab only.
    assert lab_job.provisional_query is not None
    assert lab_job.provisional_query.startswith(lab_job.windows_query)
    cards = base.job == "cards"
    settings = cfg.cards if cards else cfg.vehicles
    shipped = base.cards if cards else base.vehicles
    flag = "provisional_features" if cards else "provisional_stats"
    assert getattr(settings, flag) and not getattr(shipped, flag)
    if base.job == "vehicles":  # its shipped 30 s batch spacing would idle a replay
        assert base.vehicles.aggregates_interval is not None
        assert cfg.vehicles.aggregates_interval is None


class _Query:
    def __init__(self, name: str) -> None:
        self.name, self.stopped = name, False

    def stop(self) -> None:
        self.stopped = True


def test_the_lab_stops_the_queries_it_reads_nothing_of() -> None:
    queries = [_Query(n) for n in ("j.deadletter", "j.stats", "j.trips", "j.alerts")]
    kept = measured(queries, {"j.stats", "j.alerts"})
    assert [q.name for q in kept] == ["j.stats", "j.alerts"]
    assert [q.name for q in queries if q.stopped] == ["j.deadletter", "j.trips"]


def test_provisional_rows_are_compared_with_the_final_ones() -> None:
    batch = {
        "batchId": 0,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "durationMs": {"triggerExecution": 1_000},
        "eventTime": {"max": "2026-01-01T00:00:50.000Z"},
    }
    end = 1767225660000  # the minute's end, 10 s after the newest event the batch read
    during = 1767225600500  # written while the batch ran

    def row(window: str, n: int, final: bool) -> dict[str, object]:
        return {"w": window, "window_end": end, "n": n, "final": final}

    rows = [
        (during, row("a", 1, False)),
        (during + 1, row("a", 3, False)),  # a correction: a straggler landed
        (during + 2, row("a", 3, True)),
        (during, row("b", 2, False)),
        (during + 5, row("b", 2, True)),
        (during + 6, row("b", 2, False)),  # the other query wrote after the final row
        (during, row("c", 1, True)),  # a final window without a provisional row
        (during, row("d", 1, False)),  # a window still open when the input ended
    ]
    view = provisional_view(rows, [batch], ("w",), "n")
    assert view == {
        "windows": 3,
        "without_provisional": 1,
        "open": 1,
        "provisional_rows": 5,
        "corrections": 2,
        "changed": 1,
        "provisional_after_final": 1,
        "latency_ms": {"p50": -10_000.0, "p99": -10_000.0},
    }


def test_a_corrected_time_point_windows_on_the_estimated_clock() -> None:
    from core.config import load_model
    from pipeline.config import PipelineConfig
    from streamsim.lab.watermark import parse_times

    base = load_model(PipelineConfig, REPO_ROOT / SCENARIOS["vehicles"].pipeline_file)
    raw = point_config(base, "5 seconds", "lab.in", "t1", 500)
    assert raw.clock.time == "event_time" and raw.clock.offsets_topic is None
    fixed = point_config(base, "5 seconds", "lab.in", "t2", 500, "corrected_event_time")
    assert fixed.clock.corrected and fixed.clock.offsets_topic == "lab.clock-offsets-t2"
    assert parse_times("event_time,corrected_event_time", "vehicles") == [
        "event_time",
        "corrected_event_time",
    ]
    with pytest.raises(StreamsimError, match="no corrected_event_time"):
        parse_times("corrected_event_time", "cards")
    with pytest.raises(StreamsimError, match="--times"):
        parse_times("kafka_time", "vehicles")


def two_clocks(seconds: int = 120, behind_ms: int = 60_000) -> pd.DataFrame:
    """Two vehicles at 1 Hz, sent 100 ms after reading: `v-ok` on true time, `v-slow` on a
    clock `behind_ms` behind, in send order."""
    true_ms = np.repeat(np.arange(seconds) * 1000 + 1_700_000_000_000, 2)
    slow = np.tile([False, True], seconds)
    return pd.DataFrame(
        {
            "vehicle_id": np.where(slow, "v-slow", "v-ok"),
            "event_id": [f"e{i}" for i in range(2 * seconds)],
            "event_time": true_ms - np.where(slow, behind_ms, 0),
            "kafka_ts": true_ms + 100,
        }
    )


def test_the_replayed_watermark_trails_the_previous_batches_largest_event_time() -> None:
    times = np.array([1_000, 9_000, 2_000, 3_000, 4_000, 12_000, 5_000])
    batch_of, watermarks, seen = batch_watermarks(times, 3, 2_000)
    assert batch_of.tolist() == [0, 0, 0, 1, 1, 1, 2]
    # before the first batch there is none; then largest so far less 2 s, never back;
    # the last entry is the no-data batch after the input
    assert watermarks.tolist() == [0, 7_000, 10_000, 10_000]
    assert seen.tolist() == [9_000, 12_000, 12_000, 12_000]
    late = times <= watermarks[batch_of]
    assert late.tolist() == [False, False, False, True, True, False, True]


def test_a_clock_behind_is_late_on_its_own_time_and_on_time_corrected() -> None:
    frame = two_clocks()
    raw = frame["event_time"].to_numpy(np.int64)
    batch_of, watermarks, _ = batch_watermarks(raw, 10, 5_000)
    late = raw <= late_watermarks(watermarks)[batch_of]
    # rows are dropped against the previous batch's watermark: from the third batch on, every
    # reading of the slow clock is a minute behind it
    slow = late[frame["vehicle_id"].eq("v-slow").to_numpy()]
    assert not slow[:10].any() and slow[10:].all()
    assert not late[frame["vehicle_id"].eq("v-ok").to_numpy()].any()
    fixed = on_time(frame, "corrected_event_time")
    assert fixed["device_event_time"].tolist() == frame["event_time"].tolist()
    corrected = fixed["event_time"].to_numpy(np.int64)
    # the estimate is the lowest lag: 100 ms of delay is left in, the minute is not
    assert np.abs(corrected - (frame["kafka_ts"].to_numpy() - 100)).max() == 100
    batch_of, watermarks, _ = batch_watermarks(corrected, 10, 5_000)
    assert not (corrected <= late_watermarks(watermarks)[batch_of]).any()
    assert on_time(frame, "event_time") is frame


def test_replayed_windows_close_once_the_watermark_passes_their_end() -> None:
    kept = pd.DataFrame({"vehicle_id": ["a", "a", "b"], "event_time": [10_000, 70_000, 30_000]})
    # batches' watermarks, the last the no-data batch's; largest event time read by each
    watermarks = np.array([0, 20_000, 65_000, 65_000])
    seen = np.array([40_000, 85_000, 90_000, 90_000])
    # 1-minute tumbling: (a, 0-60 s) and (b, 0-60 s) close in batch 2, (a, 60-120 s) never
    assert sorted(window_latencies(kept, [(60_000, 60_000)], watermarks, seen)) == [
        30_000.0,
        30_000.0,
    ]
    # 2-minute windows sliding by 1 minute: all end at 60 s or later, only those closed
    slid = window_latencies(kept, [(120_000, 60_000)], watermarks, seen)
    assert sorted(slid) == [30_000.0, 30_000.0]
