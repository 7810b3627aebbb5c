"""`SilenceTails`, the silence rule's bucket form, against `SilenceState` per device: the same
alerts over a seeded stream of many devices delivered out of order in batches, late readings
refused and counted, duplicates taken once, devices forgotten after `ttl_ms`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from detectors import SilenceParams, SilenceState
from detectors.series.silence_tails import SilenceTails

PARAMS = SilenceParams(min_intervals=4.0, history=8, min_history=1)


def stream(seed: int, devices: int = 40, readings: int = 60) -> pd.DataFrame:
    """Readings of `devices` devices, each on its own interval, with silences (long gaps its
    seq steps by one across) and losses (gaps its seq skips), shuffled within 20 s."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in range(devices):
        every = int(rng.integers(2_000, 10_000))
        t, seq = 0, 0
        for i in range(readings):
            gap = every * (int(rng.integers(5, 30)) if rng.random() < 0.05 else 1)
            seq += int(rng.integers(2, 9)) if rng.random() < 0.05 else 1
            t += gap + int(rng.integers(-200, 200))
            rows.append((f"d{d}", f"d{d}-{i}", t, float(seq)))
    frame = pd.DataFrame(rows, columns=["entity_id", "event_id", "event_time", "seq"])
    arrival = frame["event_time"] + rng.integers(0, 20_000, len(frame))
    return frame.iloc[np.argsort(arrival.to_numpy(), kind="stable")].reset_index(drop=True)


def per_device(frame: pd.DataFrame) -> set[tuple[str, tuple[str, ...], int]]:
    """`SilenceState` per device over its readings in event-time order."""
    alerts = set()
    for device, rows in frame.sort_values(["event_time", "event_id"]).groupby("entity_id"):
        state = SilenceState(str(device), PARAMS)
        for r in rows.itertuples():
            for a in state.update(r.event_id, r.event_time, int(r.seq)):
                alerts.add((a.alert_id, a.event_ids, a.event_time))
    return alerts


def test_batches_out_of_order_raise_the_per_device_alerts() -> None:
    frame = stream(seed=5)
    tails = SilenceTails(PARAMS)
    got = set()
    latest = 0
    for start in range(0, len(frame), 97):
        batch = frame.iloc[start : start + 97]
        watermark = latest - 30_000  # Spark drops what is at or before it
        taken = batch[batch["event_time"] > watermark]
        got |= {(a.alert_id, a.event_ids, a.event_time) for a in tails.advance(taken, watermark)}
        latest = max(latest, int(batch["event_time"].max()))
    got |= {(a.alert_id, a.event_ids, a.event_time) for a in tails.advance(frame.iloc[:0], None)}
    assert tails.late_dropped == 0
    expected = per_device(frame)
    assert len(expected) >= 20  # the seeded stream has silences
    assert got == expected


def test_late_readings_are_refused_and_counted_and_repeats_taken_once() -> None:
    frame = stream(seed=6, devices=3, readings=20).sort_values("event_time")
    tails = SilenceTails(PARAMS)
    first = tails.advance(frame, None)
    again = tails.advance(frame, None)  # every reading again: repeats or late
    assert again == []
    assert tails.late_dropped == len(frame) - 3  # each device's last reading is a repeat
    assert len(tails.tails) == 3 * (PARAMS.history + 1)
    assert {a.alert_id for a in first} == {a for a, _, _ in per_device(frame)}


def test_a_device_is_forgotten_ttl_after_its_latest_reading() -> None:
    frame = stream(seed=7, devices=2, readings=12)
    latest = frame.groupby("entity_id")["event_time"].max().sort_values()
    assert latest.iloc[0] < latest.iloc[1]
    tails = SilenceTails(PARAMS, ttl_ms=60_000)
    tails.advance(frame, None)  # all released; no watermark, so nothing forgotten yet
    assert set(tails.tails["entity_id"]) == {"d0", "d1"}
    tails.advance(frame.iloc[:0], int(latest.iloc[0]) + 60_001)
    assert set(tails.tails["entity_id"]) == {latest.index[1]}
    tails.advance(frame.iloc[:0], int(latest.iloc[1]) + 60_001)
    assert tails.tails.empty
