"""The engine end to end with in-process sinks: determinism, ordering, envelope and truth."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from scenarios.catalog import ScenarioConfig, run_scenario
from simulators.sinks import JsonlSink, MemorySink
from simulators.truth import TRUTH_KEYS

DISORDERLY: dict[str, Any] = {
    "entities": 60,
    "duration_s": 40,
    "seed": 5,
    "clock": {
        "offset_s": {"type": "normal", "mean": 0, "std": 2},
        "jumps": {"probability": 0.01},
        "resets": {"probability": 0.002, "duration_s": 5},
    },
    "delivery": {
        "delay_s": {"type": "lognormal", "median": 0.2, "sigma": 1.0},
        "outages": {"rate_per_hour": 120, "duration_s": 8, "buffer_cap": 2, "flush": "shuffled"},
        "duplicates": {"probability": 0.1},
        "drops": {"probability": 0.05},
    },
    "domain": {"type": "sensors", "interval_s": 1, "faults": {"rate_per_hour": 60}},
}


def config(**changes: Any) -> ScenarioConfig:
    return ScenarioConfig.model_validate({**DISORDERLY, **changes})


def digest(directory: Path) -> str:
    h = hashlib.sha256()
    for name in ("events.jsonl", "truth.jsonl"):
        h.update((directory / name).read_bytes())
    return h.hexdigest()


def run_jsonl(tmp_path: Path, name: str, cfg: ScenarioConfig, **kwargs: Any) -> str:
    run_scenario(cfg, JsonlSink(tmp_path / name), **kwargs)
    return digest(tmp_path / name)


@pytest.fixture(scope="module")
def memory_run() -> tuple[MemorySink, Any]:
    sink = MemorySink()
    summary = run_scenario(config(), sink, speed="max")
    return sink, summary


def test_same_config_and_seed_give_the_same_stream_at_any_speed(tmp_path: Path) -> None:
    fast = run_jsonl(tmp_path, "max", config(), speed="max")
    paced = run_jsonl(tmp_path, "paced", config(), speed=400.0)  # 40 s in ~0.1 s of wall time
    capped_cfg = config(pacing={"speed": "max", "max_rate": 20_000})
    capped = run_jsonl(tmp_path, "capped", capped_cfg)
    assert fast == paced == capped
    assert run_jsonl(tmp_path, "other_seed", config(), speed="max", seed=6) != fast


def test_a_run_id_changes_every_id_and_nothing_else(memory_run: Any) -> None:
    sink, summary = memory_run
    other = MemorySink()
    salted = run_scenario(config(run_id="run-2"), other, speed="max")
    old, new = summary.id_prefix, salted.id_prefix
    assert old != new and len(old) == len(new)
    for before, after in ((sink.events, other.events), (sink.truth, other.truth)):
        assert len(before.values) == len(after.values)
        assert [v.replace(old.encode(), new.encode()) for v in before.values] == after.values


def test_the_stream_does_not_depend_on_the_sink(tmp_path: Path, memory_run: Any) -> None:
    sink, _ = memory_run
    run_scenario(config(), JsonlSink(tmp_path), speed="max")
    lines = (tmp_path / "events.jsonl").read_bytes().splitlines()
    assert lines == sink.events.values


def test_events_leave_in_emit_order_with_emit_time_as_timestamp(memory_run: Any) -> None:
    sink, _ = memory_run
    stamps = sink.events.timestamps
    assert stamps == sorted(stamps)
    sent = [orjson.loads(v) for v in sink.truth.values]
    sent = [t for t in sent if t["emit_time"] is not None]
    assert sorted(t["emit_time"] for t in sent) == stamps


def test_keys_are_entity_ids_and_events_follow_the_envelope(memory_run: Any) -> None:
    sink, _ = memory_run
    for key, value in zip(sink.events.keys, sink.events.values, strict=True):
        event = orjson.loads(value)
        assert list(event)[:5] == ["schema", "event_id", "sensor_id", "event_time", "seq"]
        assert event["schema"] == "sensor.reading/1" and key == event["sensor_id"].encode()
    sizes = [len(v) for v in sink.events.values]
    assert 150 <= sum(sizes) / len(sizes) <= 260


def test_truth_records_have_exactly_the_contract_keys_and_consistent_times(
    memory_run: Any,
) -> None:
    sink, _ = memory_run
    for key, value in zip(sink.truth.keys, sink.truth.values, strict=True):
        t = orjson.loads(value)
        assert tuple(t) == TRUTH_KEYS and key == t["event_id"].encode()
        assert t["clock_offset_ms"] == t["event_time"] - t["true_time"]
        if t["dropped"] is None:
            assert t["delay_ms"] == t["emit_time"] - t["true_time"] >= 0
        else:
            assert t["emit_time"] is None and t["delay_ms"] is None
            assert t["dropped"] in ("network", "buffer_overflow")
        assert t["duplicate_of"] in (None, t["event_id"])


def test_duplicates_are_identical_resends(memory_run: Any) -> None:
    sink, summary = memory_run
    by_id = defaultdict(list)
    for value in sink.events.values:
        by_id[orjson.loads(value)["event_id"]].append(value)
    repeats = {k: v for k, v in by_id.items() if len(v) > 1}
    assert repeats and all(len(set(v)) == 1 for v in repeats.values())
    assert sum(len(v) - 1 for v in repeats.values()) == summary.duplicates


def test_every_reading_has_one_truth_fate_and_seq_counts_per_device(memory_run: Any) -> None:
    sink, summary = memory_run
    truth = [orjson.loads(v) for v in sink.truth.values]
    originals = [t for t in truth if t["duplicate_of"] is None]
    assert len({t["event_id"] for t in originals}) == len(originals) == summary.readings
    events = {orjson.loads(v)["event_id"]: orjson.loads(v) for v in sink.events.values}
    per_device = defaultdict(list)
    for t in originals:
        seq = events[t["event_id"]]["seq"] if t["event_id"] in events else None
        per_device[t["entity_id"]].append((t["true_time"], seq))
    for readings in per_device.values():
        seqs = [s for _, s in sorted(readings) if s is not None]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def test_summary_counts_match_the_records(memory_run: Any) -> None:
    sink, summary = memory_run
    truth = [orjson.loads(v) for v in sink.truth.values]
    dropped = Counter(t["dropped"] for t in truth)
    assert summary.events == len(sink.events.values) and summary.truth == len(truth)
    assert summary.dropped == dropped["network"] + dropped["buffer_overflow"] > 0
    assert dropped["buffer_overflow"] > 0
    assert summary.outages == len({t["outage_id"] for t in truth if t["outage_id"]})
    assert set(summary.to_json()) >= {
        "events",
        "truth",
        "duplicates",
        "dropped",
        "outages",
        "events_per_s",
    }


def test_faults_label_readings_by_incident(memory_run: Any) -> None:
    sink, _ = memory_run
    truth = {orjson.loads(v)["event_id"]: orjson.loads(v) for v in sink.truth.values}
    stuck_values = defaultdict(set)
    labels = Counter()
    for value in sink.events.values:
        event = orjson.loads(value)
        t = truth[event["event_id"]]
        labels[t["label"]] += 1
        assert (t["label"] == "none") == (t["incident_id"] is None)
        if t["label"] == "stuck_sensor":
            stuck_values[t["incident_id"]].add(event["temperature_c"])
    assert labels["stuck_sensor"] and labels["spike"] and labels["none"]
    assert all(len(v) == 1 for v in stuck_values.values())  # a stuck sensor repeats itself


def test_event_limit_stops_after_exactly_that_many_events() -> None:
    sink = MemorySink()
    summary = run_scenario(config(), sink, events=777, speed="max")
    assert summary.events == len(sink.events.values) == 777
    sent = [t for t in map(orjson.loads, sink.truth.values) if t["dropped"] is None]
    assert len(sent) == 777


def test_reporting_interval_sets_the_event_rate() -> None:
    quiet = {
        "entities": 10,
        "duration_s": 100,
        "clock": {"offset_s": 0, "drift_ppm": 0},
        "delivery": {"delay_s": 0},
        "domain": {"type": "sensors", "interval_s": 2, "jitter_s": 0.5},
    }
    sink = MemorySink()
    run_scenario(ScenarioConfig.model_validate(quiet), sink, speed="max")
    per_sensor = Counter(orjson.loads(v)["sensor_id"] for v in sink.events.values)
    assert set(per_sensor.values()) <= {49, 50, 51}
