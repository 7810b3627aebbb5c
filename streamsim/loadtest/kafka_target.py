"""`target: kafka`: records produced to a topic at an open-model rate, timed from their intended
send times, with a named Spark job's lag and the produce-to-alert latency.

- **Records** are built before the clock starts: a scenario's events in emit order (run as fast
  as possible into memory, with truth; a record whose truth label is not `none` carries a
  planted incident) or synthetic payloads. Each is produced at its intended send time
  (`shapes.send_times`), whatever happened to the ones before (open model).
- **Ack latency** = the delivery report's time - the intended send time, in the HdrHistogram
  `recorder.Recorder` (no coordinated omission: a producer queue that is full delays the send,
  and that wait is in the latency; each such wait is counted as `in_flight_limit_hits`). The
  producing thread polls for delivery reports while it waits for the next send time, so a
  report is timed within one poll (at most 2 ms) of its arrival. A failed delivery is an
  error of kind `delivery_<code>`.
- **Lag** of the job named by `target.job`: sampled every `lag.sample_s`, the topic's end
  offsets minus the end offsets of the job's latest batch on that topic, as its progress
  records in the `metrics` topic give them (`pipeline.progress/1`, published per batch by
  `pipeline.metrics`), per query, the slowest query counting. Not the checkpoint files: the
  metrics topic works for a job on another machine too. `lag.max` is the largest sample;
  `lag.recovery_s` the seconds from that sample until the lag is back at `lag.recovered_at`.
- **End to end**: each alert on `target.alerts_topic` naming (in `event_ids`) a produced
  record of a planted incident: the alert's Kafka timestamp - the intended send time (wall
  clock) of the latest of those records. Left out when no such alert arrived.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import orjson
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from core.config import StackConfig, load_model
from core.contracts import topics
from core.errors import StreamsimError
from core.kafka import ensure_topics, producer_config
from core.kafka.admin import is_reachable
from core.kafka.clients import consumer_config
from core.kafka.offsets import end_offsets
from streamsim.loadtest.config import KafkaTarget, LagSettings, PayloadSource, ScenarioSource
from streamsim.loadtest.recorder import Recorder
from streamsim.loadtest.runner import RunResult

POLL_S = 0.002
DRAIN_POLL_S = 0.2
#: Why `drain` ended: the lag recovered (no alerts traced), the alerts settled, the deadline
#: came, or there was nothing to watch (no job, no alerts).
DrainEnd = Literal["recovered", "settled", "deadline", "unwatched"]
PROGRESS_SCHEMA_PREFIX = "pipeline.progress/"


@dataclass
class KafkaPlan:
    topic: str
    keys: list[bytes | None]
    values: list[bytes]
    planted: dict[str, int]  # event_id of a record of a planted incident -> its slot
    kinds: dict[str, int]


def _scenario_records(source: ScenarioSource, stack: StackConfig, n: int) -> KafkaPlan:
    from scenarios.catalog import ScenarioConfig, run_scenario
    from simulators.sinks.memory import MemorySink

    cfg = load_model(ScenarioConfig, source.file)
    sink = MemorySink()
    run_scenario(cfg, sink, events=n, speed="max", seed=source.seed, stack=stack)
    if not sink.events.values:
        raise StreamsimError(f"{source.file}: the scenario produced no events")
    assert sink.topics is not None
    labelled = set()
    for value in sink.truth.values:
        truth = orjson.loads(value)
        if truth.get("label", "none") != "none":
            labelled.add(truth["event_id"])
    keys: list[bytes | None] = []
    values: list[bytes] = []
    planted: dict[str, int] = {}
    events = sink.events
    for slot in range(n):  # a short scenario is cycled (its event ids then repeat)
        i = slot % len(events.values)
        keys.append(events.keys[i] if i < len(events.keys) else None)
        values.append(events.values[i])
        if slot < len(events.values):
            event_id = orjson.loads(events.values[i]).get("event_id")
            if event_id in labelled:
                planted[event_id] = slot
    kinds = {"events": n, "planted": len(planted), "cycled": max(0, n - len(events.values))}
    return KafkaPlan(sink.topics.events, keys, values, planted, kinds)


def _payload_records(source: PayloadSource, n: int, seed: int) -> KafkaPlan:
    rng = np.random.default_rng([seed, 0xCAFE])
    key_ids = rng.integers(0, source.keys, n)
    pad = "x" * max(0, source.bytes - 80)
    keys: list[bytes | None] = [f"key-{k:08d}".encode() for k in key_ids.tolist()]
    values = [
        orjson.dumps({"schema": "loadtest.payload/1", "event_id": f"lt-{i}", "seq": i, "pad": pad})
        for i in range(n)
    ]
    return KafkaPlan("loadtest.payload", keys, values, {}, {"payload": n})


def plan_records(target: KafkaTarget, stack: StackConfig, n: int, seed: int) -> KafkaPlan:
    source = target.source
    if isinstance(source, ScenarioSource):
        the_plan = _scenario_records(source, stack, n)
    else:
        the_plan = _payload_records(source, n, seed)
    if target.topic:
        the_plan.topic = target.topic
    return the_plan


# lag -------------------------------------------------------------------------------------


@dataclass
class LagSample:
    t_s: float
    lag: int


@dataclass
class LagMonitor:
    """Samples the job's lag on `topic` from its progress records in the metrics topic."""

    stack: StackConfig
    job: str
    topic: str
    sample_s: float
    t0: float
    samples: list[LagSample] = field(default_factory=list)
    #: query -> partition -> end offset of its latest batch on `topic`
    progress: dict[str, dict[int, int]] = field(default_factory=lambda: defaultdict(dict))
    batches: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag", daemon=True)
        self._consumer = Consumer(
            consumer_config(self.stack, group_id=f"streamsim-loadtest-{uuid.uuid4().hex[:8]}")
        )
        metrics = topics.METRICS.name
        ensure_topics(self.stack, [metrics])
        # The job's latest batches: from a little before the metrics topic's end.
        assign = []
        for p, end in end_offsets(self.stack, metrics).items():
            assign.append(TopicPartition(metrics, p, max(0, end - 5000)))
        self._consumer.assign(assign)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()

    def _read_progress(self) -> None:
        while True:
            msg = self._consumer.poll(0.05)
            if msg is None:
                return
            if msg.error():
                continue
            try:
                record = orjson.loads(msg.value() or b"")
            except orjson.JSONDecodeError:
                continue
            if not isinstance(record, dict) or record.get("job") != self.job:
                continue
            if not str(record.get("schema", "")).startswith(PROGRESS_SCHEMA_PREFIX):
                continue
            ends = (record.get("end_offsets") or {}).get(self.topic)
            if ends:
                self.batches += 1
                self.progress[record["query"]].update({int(p): int(o) for p, o in ends.items()})

    def lag_now(self) -> int | None:
        self._read_progress()
        if not self.progress:
            return None
        end = end_offsets(self.stack, self.topic)
        return max(
            sum(max(0, o - done.get(p, 0)) for p, o in end.items())
            for done in self.progress.values()
        )

    def _run(self) -> None:
        while not self._stop.is_set():
            lag = self.lag_now()
            if lag is not None:
                self.samples.append(LagSample(time.perf_counter() - self.t0, lag))
            self._stop.wait(self.sample_s)

    def figures(self, recovered_at: int | None) -> dict[str, Any] | None:
        if not self.samples:
            return None
        lags = [s.lag for s in self.samples]
        peak = int(np.argmax(lags))
        threshold = recovered_at if recovered_at is not None else int(0.1 * lags[peak])
        recovery: float | None = None
        for s in self.samples[peak:]:
            if s.lag <= threshold:
                recovery = round(s.t_s - self.samples[peak].t_s, 3)
                break
        return {"max": int(lags[peak]), "recovery_s": recovery, "recovered_at": threshold}

    def recovered(self, recovered_at: int | None) -> bool:
        figures = self.figures(recovered_at)
        return figures is not None and figures["recovery_s"] is not None

    def at_zero(self) -> bool:
        """The latest sample is 0: the job has read every record sent."""
        return bool(self.samples) and self.samples[-1].lag == 0


# alerts ----------------------------------------------------------------------------------


class AlertTracer:
    """Reads alerts from the alerts topic's end at the start; keeps those naming planted
    records: (alert Kafka timestamp ms, event ids)."""

    def __init__(self, stack: StackConfig, topic: str) -> None:
        ensure_topics(stack, [topic])
        self._consumer = Consumer(
            consumer_config(stack, group_id=f"streamsim-loadtest-{uuid.uuid4().hex[:8]}")
        )
        self._consumer.assign(
            [TopicPartition(topic, p, o) for p, o in end_offsets(stack, topic).items()]
        )
        self.alerts: list[tuple[int, list[str]]] = []
        self.last_read = 0.0  # perf_counter() of the latest alert read
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="alerts", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self._consumer.poll(0.1)
            if msg is None or msg.error():
                continue
            try:
                alert = orjson.loads(msg.value() or b"")
            except orjson.JSONDecodeError:
                continue
            ids = alert.get("event_ids") if isinstance(alert, dict) else None
            if ids:
                self.alerts.append((msg.timestamp()[1], [str(i) for i in ids]))
                self.last_read = time.perf_counter()

    def quiet_since(self, since: float) -> float:
        """Seconds without a new alert, counted from `since` at the earliest."""
        return time.perf_counter() - max(since, self.last_read)


def end_to_end_ms(
    alerts: list[tuple[int, list[str]]], planted: dict[str, int], send_ms: np.ndarray
) -> list[float]:
    """Per alert naming planted records: its timestamp - the latest intended send (ms)."""
    out = []
    for stamp, ids in alerts:
        slots = [planted[i] for i in ids if i in planted]
        if slots:
            out.append(float(stamp - max(send_ms[s] for s in slots)))
    return out


def drain(
    lag: LagSettings,
    monitor: LagMonitor | None,
    tracer: AlertTracer | None,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> DrainEnd:
    """Wait, up to `lag.drain_s`, for the lag to recover (`recovered_at`) and, with alerts
    traced, for them to settle: the lag is 0 and no alert came for `alerts_settle_s`.
    Alerts a watermark releases come in the job's later (no-data) batches; a slow alerts
    query may report after the others, so an alert-less run waits for its first alert until
    the deadline. Looks every `DRAIN_POLL_S` on `clock` (the tracer's clock too); returns
    why it ended."""
    if monitor is None and tracer is None:
        return "unwatched"
    deadline = clock() + lag.drain_s
    caught_up_at: float | None = None
    while clock() < deadline:
        recovered = monitor is None or monitor.recovered(lag.recovered_at)
        if recovered and tracer is None:
            return "recovered"
        if tracer is not None and recovered and (monitor is None or monitor.at_zero()):
            if caught_up_at is None:
                caught_up_at = clock()
            if tracer.alerts and tracer.quiet_since(caught_up_at) >= lag.alerts_settle_s:
                return "settled"
        else:
            caught_up_at = None
        sleep(DRAIN_POLL_S)
    return "deadline"


# the run ---------------------------------------------------------------------------------


@dataclass
class KafkaRun:
    result: RunResult
    lag: dict[str, Any] | None
    lag_samples: list[LagSample]
    end_to_end: list[float] | None
    alerts_traced: int


def run_kafka(
    target: KafkaTarget,
    stack: StackConfig,
    the_plan: KafkaPlan,
    times_s: np.ndarray,
    warmup_s: float,
    progress: Any = None,
) -> KafkaRun:
    if not is_reachable(stack):
        raise StreamsimError(
            f"cannot reach the broker at {stack.kafka.bootstrap_servers}: is it running? "
            "(`streamsim kafka up`, or set kafka.bootstrap)"
        )
    n = len(times_s)
    recorder = Recorder(times_s, np.zeros(n, dtype=bool), warmup_s)
    ensure_topics(stack, [the_plan.topic], partitions=target.partitions)
    producer = Producer(producer_config(stack, **target.producer))
    producer.list_topics(the_plan.topic, timeout=10)  # metadata before the clock starts
    times = times_s.tolist()
    lag_samples: list[LagSample] = []

    monitor = (
        LagMonitor(stack, target.job, the_plan.topic, target.lag.sample_s, time.perf_counter())
        if target.job
        else None
    )
    tracer = (
        AlertTracer(stack, target.alerts_topic)
        if target.alerts_topic and the_plan.planted
        else None
    )
    for helper in (monitor, tracer):
        if helper is not None:
            helper.start()
    started_at = time.time()
    t0 = time.perf_counter()
    if monitor is not None:
        monitor.t0 = t0

    def now() -> float:
        return time.perf_counter() - t0

    def delivered(slot: int, sent_s: float) -> Any:
        def callback(err: KafkaError | None, _msg: Any) -> None:
            if err is None:
                recorder.answered(slot, 200, now(), sent_s=sent_s)
            elif err.code() == KafkaError._MSG_TIMED_OUT:
                recorder.failed(slot, "timeout", now())
            else:
                recorder.failed(slot, f"delivery_{err.name().lower()}", now())

        return callback

    lag = np.full(n, np.nan)
    limit_hits = waited = 0
    timeout_ms = int(target.timeout_s * 1000)
    i = 0
    last_progress = 0.0
    topic, keys, values = the_plan.topic, the_plan.keys, the_plan.values
    try:
        while i < n:
            t = now()
            if times[i] > t:
                producer.poll(min(times[i] - t, POLL_S))
                continue
            while i < n and times[i] <= t:
                lag[i] = t - times[i]
                while True:
                    try:
                        producer.produce(topic, values[i], keys[i], on_delivery=delivered(i, now()))
                        break
                    except BufferError:  # the producer queue is full: wait, keep the slot
                        limit_hits += 1
                        if i >= recorder.first_measured:
                            waited += 1
                        producer.poll(POLL_S)
                i += 1
            producer.poll(0)
            if progress is not None and t - last_progress > 0.25:
                last_progress = t
                progress(i, recorder.finished, n, recorder)
        remaining = producer.flush(timeout_ms / 1000)
        if remaining:
            producer.flush(5)
        for slot in np.flatnonzero(np.isnan(recorder.done_at) & (recorder.outcome == 0)):
            recorder.failed(int(slot), "timeout", now())
        elapsed = now()
        if progress is not None:
            progress(n, recorder.finished, n, recorder)
        drain(target.lag, monitor, tracer)
    finally:
        for helper in (monitor, tracer):
            if helper is not None:
                helper.stop()
    lag_figures = None
    if monitor is not None:
        lag_samples = monitor.samples
        lag_figures = monitor.figures(target.lag.recovered_at)
    e2e = None
    traced = 0
    if tracer is not None:
        send_ms = started_at * 1000 + times_s * 1000
        e2e = end_to_end_ms(tracer.alerts, the_plan.planted, send_ms)
        traced = len(e2e)
    result = RunResult(
        recorder=recorder,
        started_at=started_at,
        elapsed_s=elapsed,
        in_flight_limit_hits=limit_hits,
        max_in_flight=0,
        waited_for_connection=waited,
        connect_failures=0,
        generator_lag_s=lag,
    )
    return KafkaRun(result, lag_figures, lag_samples, e2e or None, traced)


def write_lag_chart(samples: list[LagSample], warmup_s: float, out: Path) -> list[Path]:
    """`lag_over_time.vl.json` and `.html`: the job's lag against time."""
    from streamsim.loadtest.charts import _HTML, SCHEMA

    spec = {
        "$schema": SCHEMA,
        "title": f"consumer lag (records); warm-up ends at {warmup_s:g} s",
        "width": 700,
        "height": 250,
        "data": {"values": [{"t_s": round(s.t_s, 3), "lag": s.lag} for s in samples]},
        "mark": {"type": "line", "point": True},
        "encoding": {
            "x": {"field": "t_s", "type": "quantitative", "title": "seconds"},
            "y": {"field": "lag", "type": "quantitative", "title": "lag (records)"},
        },
    }
    text = orjson.dumps(spec).decode()
    vl, html = out / "lag_over_time.vl.json", out / "lag_over_time.html"
    vl.write_text(text)
    html.write_text(_HTML.format(title="consumer lag", spec=text))
    return [vl, html]


def percentiles_ms(values: list[float]) -> dict[str, float]:
    p50, p99 = np.percentile(np.asarray(values, dtype=np.float64), [50, 99])
    return {"p50": round(float(p50), 3), "p99": round(float(p99), 3)}
