"""`bench simulator`: the simulator into Kafka vs Kafka's ProducerPerformance, same run.

Method: the scenario is first run into JSONL to take a sample of its real records; then the
simulator sends N events into the broker (`simulate --sink kafka --speed max`, as a child process
so its peak RSS is its own), and ProducerPerformance sends N records drawn from that sample with
the same producer settings (acks=all, idempotence, lz4, linger, batch size). The ratio is the
simulator's events/s over ProducerPerformance's records/s for as many records as the simulator
sent events; since each event also writes a truth record, `records_per_s` (events + truth) and
`records_ratio` compare the two record for record. The machine's load average before and after
is part of the report: the figures only compare within one run.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

import orjson
import yaml

from core.config import StackConfig
from core.config.loader import read_yaml
from core.errors import StreamsimError
from core.kafka import ensure_topics, producer_config
from runs import commands
from streamsim.bench.process import run_measured
from streamsim.bench.producer_perf import run_producer_perf
from streamsim.bench.report import BenchReport
from streamsim.stackfile import write_stack_file

REFERENCE_TOPIC = "bench.producer-perf"
SAMPLE_EVENTS = 20_000


def simulate(args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """`streamsim simulate ARGS --json` as a child (in `env`): its summary and peak RSS."""
    run = run_measured(commands.streamsim("simulate", *args, "--json"), env)
    if run.returncode != 0:
        raise StreamsimError(f"simulate failed ({run.returncode}):\n{run.stderr[-3000:]}")
    result: dict[str, Any] = orjson.loads(run.stdout.strip().splitlines()[-1])
    result["peak_rss_mb"] = run.peak_rss_mb
    return result


def scenario_with(scenario: Path, work: Path, entities: int | None) -> Path:
    """The scenario file, with the entity count overridden when asked."""
    if entities is None:
        return scenario
    data = read_yaml(scenario)
    data["entities"] = entities
    path = work / scenario.name
    path.write_text(yaml.safe_dump(data))
    return path


SHARED_SETTINGS = ("acks", "enable.idempotence", "linger.ms", "batch.size", "compression.type")


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def bench_simulator(
    stack: StackConfig, scenario: Path, events: int, rounds: int = 1, entities: int | None = None
) -> BenchReport:
    load_before = load_average()
    producer = producer_config(stack)
    with tempfile.TemporaryDirectory(prefix="streamsim-bench-") as tmp:
        work = Path(tmp)
        stack_file = work / "stack.yaml"
        env = write_stack_file(stack, stack_file)  # client secrets by environment only
        scenario = scenario_with(scenario, work, entities)
        common = [str(scenario), "--seed", "1", "--config", str(stack_file)]

        sample = ["--events", str(SAMPLE_EVENTS), "--sink", "jsonl", "--out", str(work)]
        simulate([*common, *sample], env)
        payload = work / "events.jsonl"
        record_bytes = payload.stat().st_size / SAMPLE_EVENTS
        ensure_topics(stack, [REFERENCE_TOPIC])

        subject_rates, record_rates, reference_rates, rss = [], [], [], []
        for _ in range(rounds):
            run = simulate(
                [*common, "--events", str(events), "--speed", "max", "--sink", "kafka"], env
            )
            subject_rates.append(run["events_per_s"])
            record_rates.append(run["records_per_s"])
            rss.append(run["peak_rss_mb"])
            perf = run_producer_perf(stack, REFERENCE_TOPIC, events, payload, producer)
            reference_rates.append(perf.records_per_s)

    reference_rate = statistics.median(reference_rates)
    return BenchReport(
        subject=f"simulator:{scenario.stem}",
        rate_key="events_per_s",
        rate=statistics.median(subject_rates),
        reference="kafka ProducerPerformance",
        reference_rate=reference_rate,
        peak_rss_mb=max(rss),
        extra={
            "events": events,
            "rounds": rounds,
            "record_bytes": round(record_bytes, 1),
            # Each event is also a truth record: Kafka records/s (events + truth) compare with
            # ProducerPerformance record for record.
            "records_per_s": round(statistics.median(record_rates), 1),
            "records_ratio": round(statistics.median(record_rates) / reference_rate, 3),
            "events_per_s_rounds": subject_rates,
            "reference_rate_rounds": reference_rates,
            "producer": {k: producer[k] for k in SHARED_SETTINGS if k in producer},
            "load_average": {"before": load_before, "after": load_average()},
        },
    )
