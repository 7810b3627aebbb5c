"""`bench pipeline`: Spark jobs on two cores against references measured in the same run.

One concept per module:

- `vehicles`: the run without `--job`: the vehicle stats query vs its aggregation on the rate
  source, the whole vehicle job, alert latency and Real-time Mode (its docstring: the method);
- `jobs`: `--job JOB`: a whole job draining Kafka vs its logic on the rate source and vs
  `floor`, each job a `JobBench` spec;
- `floor`: Kafka read + parse + one window, the engine's floor for a job's input;
- `latency`: alert latency phases on a paced input;
- `topics`: topics, their records and the input a run drains; `settings`: the two-core stack
  and configs; `measure`: throughput from streaming progress; `rss`: peak RSS.
"""

from __future__ import annotations

from streamsim.bench.pipeline.floor import FLOOR_WINDOW, floor_drain, floor_stream, tumbling_counts
from streamsim.bench.pipeline.jobs import (
    JOBS,
    JobBench,
    Source,
    bench_job,
    input_sources,
    input_topics,
    job_draining,
    job_module,
    job_outputs,
    job_reference,
    job_report,
    job_schema,
    produce_job_input,
    rate_events,
    whole_job_drain,
)
from streamsim.bench.pipeline.latency import (
    LATENCY_WATERMARK,
    alert_latency,
    card_alert_latency,
    due_latencies,
)
from streamsim.bench.pipeline.measure import (
    Throughput,
    batch_events,
    event_time_per_s,
    sustained,
    throughput,
)
from streamsim.bench.pipeline.rss import peak_rss
from streamsim.bench.pipeline.settings import (
    CORES,
    PIPELINE,
    SCENARIO,
    bench_stack,
    draining,
    job_config,
)
from streamsim.bench.pipeline.topics import (
    produce_input,
    produce_kinds,
    topic_records,
    topic_size,
)
from streamsim.bench.pipeline.vehicles import (
    bench_pipeline,
    deadletter_latency,
    report,
    stats_reference,
    stats_subject,
)

__all__ = [
    "CORES",
    "FLOOR_WINDOW",
    "JOBS",
    "LATENCY_WATERMARK",
    "PIPELINE",
    "SCENARIO",
    "JobBench",
    "Source",
    "Throughput",
    "alert_latency",
    "batch_events",
    "bench_job",
    "bench_pipeline",
    "bench_stack",
    "card_alert_latency",
    "deadletter_latency",
    "draining",
    "due_latencies",
    "event_time_per_s",
    "floor_drain",
    "floor_stream",
    "input_sources",
    "input_topics",
    "job_config",
    "job_draining",
    "job_module",
    "job_outputs",
    "job_reference",
    "job_report",
    "job_schema",
    "peak_rss",
    "produce_input",
    "produce_job_input",
    "produce_kinds",
    "rate_events",
    "report",
    "stats_reference",
    "stats_subject",
    "sustained",
    "throughput",
    "topic_records",
    "topic_size",
    "tumbling_counts",
    "whole_job_drain",
]
