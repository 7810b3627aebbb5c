"""Silent device (`detectors.series.silence`): a gap longer than N of the device's own learned
intervals, judged in event time, across which the device's sequence numbers go up by one;
both forms give the same alerts."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from detectors import Alert, SilenceParams, SilenceState, silence_alerts

P = SilenceParams(min_intervals=4.0, history=8, min_history=3)


def readings(times: list[int], entity: str = "s1", seqs: list[int] | None = None) -> pd.DataFrame:
    """A device's readings; by default numbered one by one (it made no others)."""
    return pd.DataFrame(
        {
            "entity_id": entity,
            "event_id": [f"{entity}-{i}" for i in range(len(times))],
            "event_time": times,
            "seq": list(range(len(times))) if seqs is None else seqs,
        }
    )


def stateful(rows: pd.DataFrame, params: SilenceParams = P) -> list[Alert]:
    states: dict[str, SilenceState] = {}
    alerts: list[Alert] = []
    for r in rows.sort_values(["event_time", "event_id"]).itertuples():
        state = states.setdefault(r.entity_id, SilenceState(r.entity_id, params))
        alerts += state.update(r.event_id, r.event_time, r.seq)
    return alerts


def both(rows: pd.DataFrame, params: SilenceParams = P) -> list[tuple[str, ...]]:
    """The batch form's (alert_id, *event_ids), after checking the stream form agrees."""
    batch = silence_alerts(rows, params)
    got = sorted((r.alert_id, *r.event_ids) for r in batch.itertuples())
    assert got == sorted((a.alert_id, *a.event_ids) for a in stateful(rows, params))
    return got


def test_a_gap_of_many_own_intervals_fires_once_with_the_pair_around_it() -> None:
    times = [i * 10_000 for i in range(10)] + [200_000 + i * 10_000 for i in range(5)]
    got = both(readings(times))
    assert [ids[1:] for ids in got] == [("s1-9", "s1-10")]
    alert = silence_alerts(readings(times), P).iloc[0]
    assert alert["label"] == "silent_device" and alert["event_time"] == 200_000


def test_the_interval_is_the_devices_own() -> None:
    # 110 s without a reading: silent for a 10 s device, not for a 60 s one
    fast = [i * 10_000 for i in range(6)] + [160_000]
    slow = [i * 60_000 for i in range(6)] + [410_000]
    assert len(both(readings(fast))) == 1
    assert both(readings(slow)) == []


def test_single_and_double_dropped_readings_do_not_fire() -> None:
    times = [i * 5_000 for i in range(40)]
    dropped = [t for i, t in enumerate(times) if i not in (10, 20, 21, 30, 31, 32)]
    assert both(readings(dropped)) == []  # gaps of 2, 3 and 4 intervals: not longer than 4
    four = [t for i, t in enumerate(times) if i not in (10, 11, 12, 13)]
    assert len(both(readings(four))) == 1  # 5 intervals: silent


def test_a_flushed_outage_fills_its_gap_and_a_lost_one_is_no_silence() -> None:
    # the backlog arrives last, but stamped inside the gap: judged in event time, no gap left
    times = [i * 5_000 for i in range(30)]
    order = [*range(10), *range(20, 30), *range(10, 20)]
    assert both(readings([times[i] for i in order], seqs=order)) == []
    # never flushed (a full buffer): its sequence numbers skip, the device did not fall silent
    lost = [*range(10), *range(20, 30)]
    assert both(readings([times[i] for i in lost], seqs=lost)) == []
    assert len(both(readings([times[i] for i in lost]))) == 1  # the same gap, made no readings


def test_a_clock_reset_leaves_no_silence() -> None:
    # readings 10-19 stamped years back: a hole in the series now and a jump out of the past,
    # both skipped or reversed in sequence numbers
    times = [i * 5_000 for i in range(30)]
    stamped = [t - 10**12 if 10 <= i < 20 else t for i, t in enumerate(times)]
    assert both(readings(stamped, seqs=list(range(30)))) == []
    assert both(readings(stamped, seqs=[0] * 30)) == []  # no pace learned from one stamp


def test_an_unknown_sequence_number_never_fires() -> None:
    times = [i * 5_000 for i in range(6)] + [80_000]
    rows = readings(times).astype({"seq": float})
    rows.loc[6, "seq"] = np.nan
    assert both(rows) == []
    with pytest.raises(ValueError, match="missing columns \\['seq'\\]"):
        silence_alerts(readings(times).drop(columns="seq"))


def test_too_little_history_is_not_judged() -> None:
    assert both(readings([0, 5_000, 100_000])) == []  # one gap learned: below min_history
    assert len(both(readings([0, 5_000, 10_000, 15_000, 100_000]))) == 1


def test_readings_stamped_alike_teach_no_interval() -> None:
    # two readings with one stamp (a clock jump back): an interval of 0 judges nothing
    p = SilenceParams(min_intervals=4.0, min_history=1)
    assert both(readings([0, 0, 30_000]), p) == []
    assert len(both(readings([0, 5_000, 30_000]), p)) == 1


def test_duplicates_count_once_and_devices_are_judged_apart() -> None:
    a = readings([i * 5_000 for i in range(8)] + [100_000], "a")
    b = readings([i * 30_000 for i in range(8)], "b")
    rows = pd.concat([a, a.iloc[[2, 5]], b], ignore_index=True)
    got = both(rows)
    assert [ids[1:] for ids in got] == [("a-7", "a-8")]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_stream_equals_batch_on_jittered_series_with_drops(seed: int) -> None:
    rng = np.random.default_rng(seed)
    frames = []
    for k in range(20):
        interval = rng.uniform(4_000, 12_000)
        t = np.cumsum(rng.normal(interval, 100, 80)).astype(np.int64)
        keep = rng.random(80) > 0.05
        keep[rng.integers(10, 70) : rng.integers(10, 70) + 8] = False  # some silences
        frames.append(readings(t[keep].tolist(), f"s{k}"))
    rows = pd.concat(frames, ignore_index=True).sample(frac=1, random_state=seed)
    assert len(both(rows)) > 0


def test_the_state_snapshot_round_trips() -> None:
    times = [i * 5_000 for i in range(6)] + [80_000]
    whole = stateful(readings(times))
    first = SilenceState("s1", P)
    for i, t in enumerate(times[:4]):
        first.update(f"s1-{i}", t, i)
    second = SilenceState("s1", P)
    second.restore(json.loads(json.dumps(first.snapshot())))
    rest = [a for i, t in enumerate(times[4:], 4) for a in second.update(f"s1-{i}", t, i)]
    assert [a.alert_id for a in rest] == [a.alert_id for a in whole] and len(rest) == 1
