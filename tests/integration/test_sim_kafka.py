"""The simulator against a real broker: keys, CreateTime timestamps, nothing lost, duplicates
exactly as truth says, backpressure without loss, and failed deliveries reported."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from confluent_kafka import TIMESTAMP_CREATE_TIME

from core.config import StackConfig
from core.contracts.topics import SEND_TAG_HEADER
from core.kafka.reader import topic_messages
from scenarios.catalog import ScenarioConfig, run_scenario
from simulators.sinks import JsonlSink
from simulators.sinks.kafka import KafkaSink
from streamsim.chaos.ledger import Ledger, count_against_truth
from streamsim.verify import read_kafka, verify
from streamsim.verify.readers import consume_topic

pytestmark = pytest.mark.integration

DISORDER: dict[str, Any] = {
    "entities": 300,
    "duration_s": 60,
    "seed": 21,
    "clock": {"offset_s": {"type": "normal", "mean": 0, "std": 1}, "jumps": {"probability": 0.001}},
    "delivery": {
        "delay_s": {"type": "lognormal", "median": 0.1, "sigma": 0.8},
        "outages": {"rate_per_hour": 20, "duration_s": 15, "buffer_cap": 2, "flush": "shuffled"},
        "duplicates": {"probability": 0.05},
        "drops": {"probability": 0.02},
    },
    "domain": {"type": "sensors", "interval_s": 1},
}


def unique_scenario(**changes: Any) -> ScenarioConfig:
    tag = uuid.uuid4().hex[:8]
    data = {**DISORDER, **changes, "name": f"it_{tag}"}
    data["domain"] = {**DISORDER["domain"], "topic": f"it.readings.{tag}"}
    return ScenarioConfig.model_validate(data)


def test_topic_keys_timestamps_and_truth_agree(kafka_stack: StackConfig, tmp_path: Path) -> None:
    cfg = unique_scenario()
    summary = run_scenario(cfg, KafkaSink(kafka_stack), speed="max")
    assert summary.failed == 0 and summary.duplicates > 0 and summary.dropped > 0
    topic, truth_topic = cfg.domain.topic, f"truth.{cfg.name}"

    events = consume_topic(kafka_stack, topic)
    assert len(events.values) == summary.events
    for key, value in zip(events.keys, events.values, strict=True):
        assert key == orjson.loads(value)["sensor_id"]  # the Kafka key is the entity id

    truth_records = consume_topic(kafka_stack, truth_topic)
    truth = [orjson.loads(v) for v in truth_records.values]
    assert len(truth) == summary.truth
    assert truth_records.keys == [t["event_id"] for t in truth]

    # Every delivery truth lists is in the topic at its emit time, duplicates included; no more.
    in_topic = Counter(
        (orjson.loads(v)["event_id"], ts)
        for v, ts in zip(events.values, events.timestamps, strict=True)
    )
    in_truth = Counter((t["event_id"], t["emit_time"]) for t in truth if t["dropped"] is None)
    assert in_topic == in_truth
    per_event = Counter(orjson.loads(v)["event_id"] for v in events.values)
    retries = Counter(t["event_id"] for t in truth if t["duplicate_of"] is not None)
    assert {e: n - 1 for e, n in per_event.items() if n > 1} == dict(retries)
    dropped_ids = {t["event_id"] for t in truth if t["dropped"] is not None}
    assert dropped_ids and not dropped_ids & set(per_event)

    # The same run into files gives byte-identical events: the sink does not shape content.
    run_scenario(cfg, JsonlSink(tmp_path), speed="max")
    assert sorted((tmp_path / "events.jsonl").read_bytes().splitlines()) == sorted(events.values)

    report = verify(*read_kafka(kafka_stack, topic, truth_topic), cfg)
    assert report["ok"], {k: v for k, v in report["checks"].items() if not v["ok"]}
    assert report["timestamp_mismatches"] == 0 and report["lost"] == 0


def test_record_timestamps_are_create_time(kafka_stack: StackConfig) -> None:
    cfg = unique_scenario(entities=5, duration_s=5)
    summary = run_scenario(cfg, KafkaSink(kafka_stack), speed="max")
    messages = [m for batch in topic_messages(kafka_stack, cfg.domain.topic) for m in batch]
    assert len(messages) == summary.events > 0
    assert all(m.timestamp()[0] == TIMESTAMP_CREATE_TIME for m in messages)


def test_backpressure_slows_the_simulator_without_losing_records(kafka_stack: StackConfig) -> None:
    cfg = unique_scenario(duration_s=30)
    sink = KafkaSink(kafka_stack, **{"queue.buffering.max.messages": 100})
    summary = run_scenario(cfg, sink, speed="max")
    assert summary.backpressure_waits > 0 and summary.failed == 0
    assert len(consume_topic(kafka_stack, cfg.domain.topic).values) == summary.events


def test_tagged_sends_are_each_counted_once_under_backpressure(kafka_stack: StackConfig) -> None:
    cfg = unique_scenario(duration_s=30)
    sink = KafkaSink(kafka_stack, tag_sends=True, **{"queue.buffering.max.messages": 100})
    summary = run_scenario(cfg, sink, speed="max")
    assert summary.backpressure_waits > 0 and summary.duplicates > 0
    tags = [
        dict(msg.headers() or {}).get(SEND_TAG_HEADER)
        for batch in topic_messages(kafka_stack, cfg.domain.topic)
        for msg in batch
    ]
    assert len(tags) == summary.events and len(set(tags)) == summary.events and None not in tags
    # the duplicates the simulator meant are separate sends: none is taken for a resend
    ledger = count_against_truth(kafka_stack, cfg.name, summary.id_prefix, [cfg.domain.topic])
    assert ledger == Ledger(
        expected=summary.events,
        found=summary.events,
        lost=0,
        unexpected_duplicates=0,
        truth_records=summary.truth,
    )


def test_failed_deliveries_are_counted_and_reported(kafka_stack: StackConfig) -> None:
    cfg = unique_scenario(entities=10, duration_s=5)  # its topics are never created
    sink = KafkaSink(kafka_stack, create_topics=False, **{"message.timeout.ms": 1500})
    summary = run_scenario(cfg, sink, speed="max")
    assert summary.events > 0
    assert summary.failed == summary.events + summary.truth
    assert summary.errors and cfg.domain.topic in " ".join(summary.errors)


def test_cli_simulate_into_kafka_then_verify_stream(
    kafka_stack: StackConfig, tmp_path: Path
) -> None:
    cfg = unique_scenario(duration_s=30)
    stack_file, scenario_file = tmp_path / "stack.yaml", tmp_path / "scenario.yaml"
    stack_file.write_text(yaml.safe_dump(kafka_stack.model_dump(mode="json")))
    scenario_file.write_text(yaml.safe_dump(cfg.model_dump(mode="json")))

    def streamsim(*args: str) -> subprocess.CompletedProcess[str]:
        code = "from streamsim.cli import main; main()"
        return subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    sim = streamsim(
        "simulate", str(scenario_file), "--speed", "max", "--config", str(stack_file), "--json"
    )
    assert sim.returncode == 0, sim.stderr
    summary = orjson.loads(sim.stdout.strip().splitlines()[-1])
    ver = streamsim(
        "verify-stream",
        "--topic",
        cfg.domain.topic,
        "--truth-topic",
        f"truth.{cfg.name}",
        "--config",
        str(stack_file),
        "--config",
        str(scenario_file),
        "--json",
    )
    assert ver.returncode == 0, ver.stdout + ver.stderr
    report = orjson.loads(ver.stdout.strip().splitlines()[-1])
    assert report["ok"] and report["records"] == summary["events"]
