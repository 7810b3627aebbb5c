"""The live figures a running load test writes (`loadtest --progress`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson

from streamsim.loadtest.live import LiveFile, latency_so_far, phase
from streamsim.loadtest.recorder import Recorder


def recorder(n: int = 10, warmup_s: float = 1.0) -> Recorder:
    times = np.arange(n, dtype=np.float64) * 0.5
    return Recorder(times, np.zeros(n, dtype=bool), warmup_s)


def test_latency_so_far_is_empty_before_any_answer() -> None:
    assert latency_so_far(recorder()) == {"p50": None, "p95": None, "p99": None, "max": None}


def test_latency_so_far_counts_warmup_answers_from_the_intended_time() -> None:
    rec = recorder()
    rec.answered(0, 200, 0.010)  # warm-up: 10 ms
    rec.answered(4, 200, 2.030)  # measured: 30 ms
    got = latency_so_far(rec)
    assert got["max"] == 30.0
    p50 = got["p50"]
    assert p50 is not None and 10.0 < p50 < 30.0


def test_phase_follows_the_clock_and_the_sends() -> None:
    assert phase(1, 10, 0.5, 1.0) == "warmup"
    assert phase(5, 10, 2.0, 1.0) == "measured"
    assert phase(10, 10, 2.0, 1.0) == "draining"


def test_live_file_writes_at_most_once_per_interval_and_rates_the_good_answers(
    tmp_path: Path,
) -> None:
    now = [100.0]
    path = tmp_path / "progress.json"
    live = LiveFile(path, warmup_s=1.0, every_s=1.0, clock=lambda: now[0])
    rec = recorder()
    live(1, 0, 10, rec)
    first = orjson.loads(path.read_bytes())
    assert first["sent"] == 1 and first["phase"] == "warmup" and first["achieved_rate"] == 0
    rec.answered(0, 200, 0.01)
    rec.answered(1, 500, 0.51)  # an error: not in the achieved rate
    rec.answered(2, 200, 1.01)
    now[0] = 100.5
    live(3, 3, 10, rec)
    assert orjson.loads(path.read_bytes())["sent"] == 1  # too soon: not rewritten
    now[0] = 102.0
    live(4, 3, 10, rec)
    second = orjson.loads(path.read_bytes())
    assert second["phase"] == "measured"
    assert (second["good"], second["errors"]) == (2, 1)
    assert second["achieved_rate"] == 1.0  # 2 good answers over the 2 s since the first write
    assert second["latency_ms"]["max"] == 10.0
    for slot in range(3, 10):
        rec.answered(slot, 200, slot * 0.5 + 0.01)
    now[0] = 102.1
    live(10, 10, 10, rec)  # every request finished: written at once
    assert orjson.loads(path.read_bytes())["finished"] == 10
    now[0] = 103.0
    live.done()
    last = orjson.loads(path.read_bytes())
    assert last["phase"] == "done" and last["elapsed_s"] == 3.0 and last["good"] == 9
    assert not path.with_suffix(".part").exists()
