"""`streamsim lab watermark`: one seeded stream replayed through a scenario's Spark job once per
watermark, each run on fresh checkpoints and fresh output topics, to show the trade-off between
waiting for late events and discarding them. Scenarios: `vehicles` (vehicles,
its stats windows timed) and `cards` (cards, its feature windows timed).

The stream is simulated once (as fast as possible, into memory, with its truth) and produced once
to a private input topic in emit order. Per watermark, the job (`pipeline.catalog.JOBS`) runs
on a copy of the scenario's pipeline config whose `watermark` is overridden, reading the topic
`max_offsets` records per micro-batch (so the stream's event time advances batch by batch as it
would live, and the watermark can leave records behind), until every query has processed all
available input. Per point:

- `completeness`: share of the records the windowed query read that it counted (1 - late / read);
  `late_dropped`: the records it dropped as late (Spark's `numRowsDroppedByWatermark`, the
  most any one operator dropped in a batch, summed over batches: `pipeline.progress`);
- `parity`: windows matching the batch oracle / windows compared
  (`pipeline.jobs.vehicles.parity`; differences explained by late drops are not
  matches); null where no oracle applies (the card job's feature windows have none);
- `recall`, `precision`: the alerts scored against truth (`streamsim.evaluate.scoring`), micro
  averaged over label types (recall over incidents, precision over alerts);
- `latency_ms`: result latency in stream time: for each closed window's row, the largest
  event time the query had read when it emitted the row, minus the window's end. Replayed as
  fast as possible, wall time says nothing about a live run; stream time says how far past a
  window's end the stream must run before its result comes out (the watermark, plus a batch).

`time`: each point names the time the job windowed on, `event_time` (the device's clock) or
`corrected_event_time` (less the device's estimated clock offset, `pipeline.clock`); a sweep
over both (`times`) runs every watermark once per time, side by side. Parity is null on
corrected time: the batch oracle windows on the device's clock. The card job has no corrected
time.

Two engines (`sweep(engine=...)`): `spark` as above; `replay` (vehicles, the CLI's default
there) runs no broker or Spark: the stream is parsed once and corrected once per time, and per
point the job's watermark is modelled on micro-batches of `max_offsets` records in emit order
(`batch_watermarks`; rows dropped as late against the previous batch's, `late_watermarks`),
windows close when it passes their end (`window_latencies`), and the job's detectors run in
their batch forms over the readings it would have counted and judged (`replay_point`); parity
and the provisional rows are not modelled. Its default stream is `REPLAY_STREAM`: fewer
vehicles over an hour, so the longest watermark closes windows.

`processing_time` (beside the points in the saved report, not in the `--json` contract) shows
what a processing-time window would have reported on the same stream: 1-minute counts by the
records' emit time (the Kafka timestamp) against counts by event time.
"""

from __future__ import annotations

import json
import shutil
import threading
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from core.config import StackConfig, load_model
from core.errors import StreamsimError


@dataclass(frozen=True)
class LabJob:
    """A scenario the lab replays, its job, and the windowed query whose rows it times."""

    scenario_file: str
    pipeline_file: str
    windows_query: str  # completeness and result latency are this query's
    #: The update-mode variant of `windows_query` (rows `final: false` into the same topic),
    #: the fields naming a window, and the count compared between its first and final rows.
    provisional_query: str | None = None
    window_key: tuple[str, ...] = ()
    count_field: str = ""


#: scenario config name -> what the lab runs
SCENARIOS = {
    "vehicles": LabJob(
        "config/scenarios/vehicles.yaml",
        "config/pipelines/vehicles.yaml",
        "vehicles.stats",
        provisional_query="vehicles.stats-provisional",
        window_key=("vehicle_id", "window_s", "window_start"),
        count_field="readings",
    ),
    "cards": LabJob(
        "config/scenarios/cards.yaml",
        "config/pipelines/cards.yaml",
        "cards.features",
        provisional_query="cards.features-provisional",
        window_key=("card_token", "window_s", "window_start"),
        count_field="tx_count",
    ),
}
WINDOW_MS = 60_000
VEHICLES_JOB = "vehicles"  # the one job with a batch oracle for its windows
TIMES = ("event_time", "corrected_event_time")
CLOCK_JOBS = ("vehicles",)  # the lab's jobs that can window on corrected time


def parse_times(text: str, scenario: str) -> list[str]:
    """'event_time,corrected_event_time' -> the times to sweep (checked against the job).

    >>> parse_times("event_time, corrected_event_time", "vehicles")
    ['event_time', 'corrected_event_time']
    """
    out = [t.strip() for t in text.split(",") if t.strip()]
    wrong = [t for t in out if t not in TIMES]
    if wrong or not out:
        raise StreamsimError(f"--times: one or more of {', '.join(TIMES)}, not {text!r}")
    if "corrected_event_time" in out and scenario not in CLOCK_JOBS:
        raise StreamsimError(f"--times: the {scenario} job has no corrected_event_time")
    return out


def parse_watermarks(text: str) -> list[tuple[str, int]]:
    """'0s,5s,30s,2m,10m' -> [(Spark duration, ms)].

    >>> parse_watermarks("0s,5s,2m")
    [('0 seconds', 0), ('5 seconds', 5000), ('2 minutes', 120000)]
    """
    units = {"s": ("seconds", 1000), "m": ("minutes", 60_000), "h": ("hours", 3_600_000)}
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        number, unit = part[:-1], part[-1]
        if unit not in units or not number.replace(".", "", 1).isdigit():
            raise StreamsimError(f"--watermarks: {part!r} is not a duration like 0s, 30s, 2m or 1h")
        word, scale = units[unit]
        value = int(number) if number.isdigit() else float(number)
        out.append((f"{value} {word}", int(float(number) * scale)))
    if not out:
        raise StreamsimError("--watermarks: give at least one, e.g. 0s,5s,30s,2m,10m")
    return out


@dataclass
class Stream:
    keys: list[bytes]
    values: list[bytes]
    emit_ms: list[int]
    truth: pd.DataFrame
    event_time_ms: np.ndarray


def simulate(
    scenario_file: str,
    events: int,
    seed: int | None,
    stack: StackConfig,
    entities: int | None = None,
    duration_s: float | None = None,
) -> Stream:
    """The scenario's stream (at most `events` records), its entities and duration overridden
    where given."""
    from scenarios.catalog import ScenarioConfig, run_scenario
    from simulators.sinks.memory import MemorySink

    cfg = load_model(ScenarioConfig, scenario_file).with_overrides(entities=entities)
    sink = MemorySink()
    run_scenario(
        cfg, sink, events=events, duration_s=duration_s, speed="max", seed=seed, stack=stack
    )
    rows = [orjson.loads(v) for v in sink.truth.values]
    truth = pd.DataFrame.from_records(rows)
    event_times = np.array([orjson.loads(v)["event_time"] for v in sink.events.values])
    return Stream(sink.events.keys, sink.events.values, sink.events.timestamps, truth, event_times)


def produce(stack: StackConfig, topic: str, stream: Stream, partitions: int) -> None:
    from confluent_kafka import Producer

    from core.kafka import ensure_topics, producer_config

    ensure_topics(stack, [topic], partitions=partitions)
    producer = Producer(producer_config(stack))
    for key, value, ts in zip(stream.keys, stream.values, stream.emit_ms, strict=True):
        while True:
            try:
                producer.produce(topic, value, key, timestamp=ts)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(60):
        raise StreamsimError(f"could not produce the stream to {topic}")


class _Progress:
    """A listener keeping every batch's raw progress per query name."""

    def __init__(self) -> None:
        from pyspark.sql.streaming import StreamingQueryListener

        self.batches: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.lock = threading.Lock()
        owner = self

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                progress = json.loads(event.progress.json)
                with owner.lock:
                    owner.batches[progress.get("name") or progress["id"]].append(progress)

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                pass

        self.listener = Listener()


def point_config(
    base: Any,
    watermark: str,
    topic: str,
    tag: str,
    max_offsets: int,
    time: str = "event_time",
) -> Any:
    data = base.model_dump(mode="json", exclude_unset=True)
    clock = {**data.get("clock", {}), "time": time}
    if time != "event_time":
        clock["offsets_topic"] = f"lab.clock-offsets-{tag}"
    data.update(
        {
            "clock": clock,
            "watermark": watermark,
            "input_topics": [topic],
            "output_topic": f"lab.alerts-{tag}",
            "deadletter_topic": f"lab.deadletter-{tag}",
            "max_offsets_per_trigger": max_offsets,
            "trigger": {**data.get("trigger", {}), "mode": "microbatch", "interval": "0 seconds"},
        }
    )
    vt = data.get("vehicles")
    if vt is not None:
        vt["stats_topic"] = f"lab.stats-{tag}"
        vt["trips_topic"] = f"lab.trips-{tag}"
        vt["late"] = {**vt.get("late", {}), "mode": "drop", "topic": f"lab.late-{tag}"}
        vt["deadletter_trigger"] = {"mode": "microbatch"}
        # A replay runs flat out: stats and trips batch as often as the alerts, not every 30 s
        # (the batches, not their spacing, set how far the stream's event time moves).
        vt["aggregates_interval"] = None
        vt["provisional_stats"] = True  # provisional rows beside the final ones
    cv = data.get("cards")
    if cv is not None:
        cv["features_topic"] = f"lab.features-{tag}"
        cv["features_trigger"] = {"mode": "microbatch", "interval": "0 seconds"}
        cv["deadletter_trigger"] = {"mode": "microbatch"}
        # The replayed stream has no profiles of its own: the stack's `cards.profiles` holds
        # other runs' cards, which would make the spending rule's figures depend on them.
        cv["profiles_topic"] = None
        cv["provisional_features"] = True  # provisional rows beside the final ones
    return type(base).model_validate(data)


def windows_topic(cfg: Any) -> str:
    """The topic of the job's windowed rows: vehicle stats, or card features."""
    if cfg.job == VEHICLES_JOB:
        return str(cfg.vehicles.stats_topic)
    return str(cfg.cards.features_topic)


def _percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None}
    p50, p99 = np.percentile(np.asarray(values, dtype=np.float64), [50, 99])
    return {"p50": round(float(p50), 1), "p99": round(float(p99), 1)}


def result_latencies(
    stats: list[tuple[int, dict[str, Any]]], batches: list[dict[str, Any]]
) -> list[float]:
    """Per stats row (Kafka timestamp, row): the largest event time its query had read by the
    batch that emitted it, minus the row's window end (ms)."""
    from pipeline.progress import iso_ms

    spans = []
    seen_max = 0
    for b in sorted(batches, key=lambda b: b["batchId"]):
        start = iso_ms(b.get("timestamp")) or 0
        end = start + int(b.get("durationMs", {}).get("triggerExecution", 0))
        seen_max = max(seen_max, iso_ms((b.get("eventTime") or {}).get("max")) or 0)
        spans.append((end, seen_max))
    out = []
    for stamp, row in stats:
        window_end = row.get("window_end")
        if window_end is None:
            continue
        window_end_ms = int(window_end) if not isinstance(window_end, str) else iso_ms(window_end)
        # the batch running when the row was written: the first to end at or after it
        seen = next((seen for end, seen in spans if end >= stamp), spans[-1][1] if spans else 0)
        if seen and window_end_ms:
            out.append(float(seen - window_end_ms))
    return out


def score(alerts: list[dict[str, Any]], truth: pd.DataFrame) -> tuple[float | None, float | None]:
    from streamsim.evaluate.scoring import score_path

    labels = sorted({str(x) for x in truth["label"].dropna().unique()} - {"none"})
    unique = {a.get("alert_id", i): a for i, a in enumerate(alerts)}.values()
    detections = pd.DataFrame(
        [
            {"label": a.get("label"), "event_ids": a.get("event_ids") or [], "at": None}
            for a in unique
        ],
        columns=["label", "event_ids", "at"],
    )
    detections["detected_sim_ms"] = np.nan
    figures = score_path(detections, truth, labels)
    support = sum(f.get("support", 0) for f in figures.values())
    found = sum((f.get("recall") or 0) * f.get("support", 0) for f in figures.values())
    dets = sum(f.get("detections", 0) for f in figures.values())
    good = sum((f.get("precision") or 0) * f.get("detections", 0) for f in figures.values())
    recall = round(found / support, 4) if support else None
    precision = round(good / dets, 4) if dets else None
    return recall, precision


def processing_time_view(stream: Stream) -> dict[str, Any]:
    """1-minute counts by emit time (what a processing-time window sees when records are
    processed as they arrive) against counts by event time, on the same records."""
    by_event = pd.Series(stream.event_time_ms // WINDOW_MS).value_counts()
    by_emit = pd.Series(np.asarray(stream.emit_ms) // WINDOW_MS).value_counts()
    windows = sorted(set(by_event.index) | set(by_emit.index))
    diff = [abs(int(by_emit.get(w, 0)) - int(by_event.get(w, 0))) for w in windows]
    moved = int(
        np.count_nonzero(
            stream.event_time_ms // WINDOW_MS != np.asarray(stream.emit_ms) // WINDOW_MS
        )
    )
    worst = int(np.argmax(diff)) if diff else 0
    return {
        "window_s": WINDOW_MS // 1000,
        "windows": len(windows),
        "records_in_another_window": moved,
        "share_in_another_window": round(moved / len(stream.values), 4) if stream.values else 0,
        "total_count_error": int(sum(diff)),
        "worst_window": {
            "start_ms": int(windows[worst] * WINDOW_MS) if windows else None,
            "event_time_count": int(by_event.get(windows[worst], 0)) if windows else 0,
            "processing_time_count": int(by_emit.get(windows[worst], 0)) if windows else 0,
        },
    }


def provisional_view(
    rows: list[tuple[int, dict[str, Any]]],
    batches: list[dict[str, Any]],
    key: tuple[str, ...],
    count_field: str,
) -> dict[str, Any]:
    """The update-mode variant against the final rows, on one windows topic (Kafka timestamp,
    row): windows with a final row, those of them without a provisional row (the variant reads
    the same batches, so none), windows with provisional rows only (still open when the input
    ended: the watermark never passed them), provisional rows (`final: false`), corrections
    (provisional rows after a window's first), windows whose first provisional `count_field`
    differs from the final one, windows with a provisional row written after their final one
    (two queries, one topic: no order between them), and the first provisional row's result
    latency (stream time past the window's end, `result_latencies` over the variant's own
    batches; negative: out before the window closed).

    >>> rows = [(1, {"k": "a", "n": 1, "final": False}), (2, {"k": "a", "n": 2, "final": False}),
    ...         (3, {"k": "a", "n": 2, "final": True}), (4, {"k": "b", "n": 5, "final": True})]
    >>> view = provisional_view(rows, [], ("k",), "n")
    >>> {k: view[k] for k in ("windows", "provisional_rows", "corrections", "changed")}
    {'windows': 2, 'provisional_rows': 2, 'corrections': 1, 'changed': 1}
    """
    final: dict[tuple[Any, ...], tuple[int, dict[str, Any]]] = {}
    provisional: dict[tuple[Any, ...], list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for stamp, row in rows:
        window = tuple(row.get(k) for k in key)
        if row.get("final") is False:
            provisional[window].append((stamp, row))
        else:
            final[window] = (stamp, row)
    first = {window: min(found, key=lambda r: r[0]) for window, found in provisional.items()}
    changed = sum(
        1
        for window, (_, row) in first.items()
        if window in final and row.get(count_field) != final[window][1].get(count_field)
    )
    late = sum(
        1
        for window, found in provisional.items()
        if window in final and max(s for s, _ in found) > final[window][0]
    )
    count = sum(len(found) for found in provisional.values())
    return {
        "windows": len(final),
        "without_provisional": sum(1 for window in final if window not in provisional),
        "open": sum(1 for window in provisional if window not in final),
        "provisional_rows": count,
        "corrections": count - len(provisional),
        "changed": changed,
        "provisional_after_final": late,
        "latency_ms": _percentiles(result_latencies(list(first.values()), batches)),
    }


def run_point(
    spark: Any,
    stack: StackConfig,
    base_cfg: Any,
    topic: str,
    watermark: tuple[str, int],
    stream: Stream,
    work: Path,
    max_offsets: int,
    lab_job: LabJob,
    time: str = "event_time",
) -> dict[str, Any]:
    """One watermark's point on `time`; with the job's provisional variant, its figures
    (`provisional_view`) under the point's `provisional` key (the CLI moves them out of the
    `--json` points)."""
    from core.kafka.reader import read_topic
    from pipeline.catalog import JOBS

    tag = uuid.uuid4().hex[:8]
    checkpoints = work / f"checkpoints-{tag}"
    dirs = stack.dirs.model_copy(update={"checkpoints": checkpoints, "lake": work / f"lake-{tag}"})
    point_stack = stack.model_copy(update={"dirs": dirs})
    cfg = point_config(base_cfg, watermark[0], topic, tag, max_offsets, time)
    from core.kafka import ensure_topics

    vehicles = cfg.job == VEHICLES_JOB
    topics_out = [cfg.output_topic, cfg.deadletter_topic, windows_topic(cfg)]
    if vehicles:
        topics_out.append(cfg.vehicles.trips_topic)
    ensure_topics(point_stack, topics_out)
    windows_query = lab_job.windows_query
    keep = {windows_query, f"{cfg.job}.alerts", *filter(None, [lab_job.provisional_query])}
    if cfg.clock.corrected:
        keep.add(f"{cfg.job}.clock-offsets")  # the offsets the job looks its records up in
    progress = _Progress()
    spark.streams.addListener(progress.listener)
    queries = measured(JOBS[cfg.job](spark, point_stack, cfg), keep)
    try:
        for _ in range(2):  # the second round: no-data batches once the watermark moved
            for query in queries:
                query.processAllAvailable()
    finally:
        for query in queries:
            query.stop()
        spark.streams.removeListener(progress.listener)
    stats_batches = progress.batches.get(windows_query, [])
    read = sum(int(b.get("numInputRows", 0)) for b in stats_batches)
    from pipeline.progress import BatchReport

    reports = [BatchReport.from_progress(b) for b in stats_batches]
    late = sum(r.late_events for r in reports)
    completeness = round(1 - late / read, 6) if read else None
    alerts = read_topic(point_stack, cfg.output_topic)
    recall, precision = score(alerts, stream.truth)
    history = [r.to_dict() for r in reports if r.input_rows or r.watermark_ms]
    oracle = vehicles and not cfg.clock.corrected  # the oracle windows on the device's clock
    parity_share = _parity(spark, point_stack, cfg, history) if oracle else None
    rows = _timestamped(point_stack, windows_topic(cfg))
    latencies = result_latencies([r for r in rows if r[1].get("final") is not False], stats_batches)
    shutil.rmtree(checkpoints, ignore_errors=True)
    point: dict[str, Any] = {
        "time": time,
        "watermark_s": watermark[1] / 1000,
        "completeness": completeness,
        "late_dropped": int(late),
        "parity": parity_share,
        "recall": recall,
        "precision": precision,
        "latency_ms": _percentiles(latencies),
    }
    if lab_job.provisional_query is not None:
        point["provisional"] = provisional_view(
            rows,
            progress.batches.get(lab_job.provisional_query, []),
            lab_job.window_key,
            lab_job.count_field,
        )
    return point


def measured(queries: list[Any], keep: set[str]) -> list[Any]:
    """The queries named in `keep`, the others stopped: the lab reads nothing of trips or dead
    letters, and on two cores their batches would slow the measured ones."""
    for query in queries:
        if query.name not in keep:
            query.stop()
    return [query for query in queries if query.name in keep]


def _parity(
    spark: Any, stack: StackConfig, cfg: Any, history: list[dict[str, Any]]
) -> float | None:
    """Vehicle stats windows matching the batch oracle / windows compared (None: none)."""
    from pipeline.jobs.vehicles.parity import vehicle_stats_parity

    try:
        parity = vehicle_stats_parity(spark, stack, cfg, history=history).summary()
    except StreamsimError:
        return None
    if not parity.get("windows"):
        return None
    return round(parity["matching"] / parity["windows"], 6)


def _timestamped(stack: StackConfig, topic: str) -> list[tuple[int, dict[str, Any]]]:
    from confluent_kafka import Consumer, TopicPartition

    from core.kafka.clients import consumer_config
    from core.kafka.offsets import end_offsets

    ends = end_offsets(stack, topic)
    consumer = Consumer(consumer_config(stack, group_id=f"lab-{uuid.uuid4().hex[:6]}"))
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    out: list[tuple[int, dict[str, Any]]] = []
    want = sum(ends.values())
    misses = 0
    while len(out) < want and misses < 20:
        msg = consumer.poll(0.5)
        if msg is None:
            misses += 1
            continue
        if msg.error() or not msg.value():
            want -= 0 if msg.error() else 1
            continue
        out.append((msg.timestamp()[1], orjson.loads(msg.value() or b"{}")))
    consumer.close()
    return out


def sweep(
    stack: StackConfig,
    scenario: str,
    watermarks: list[tuple[str, int]],
    events: int,
    seed: int | None,
    work: Path,
    max_offsets: int,
    progress: Any = None,
    on_point: Any = None,
    times: tuple[str, ...] | list[str] = ("event_time",),
    engine: str = "spark",
    entities: int | None = None,
    duration_s: float | None = None,
) -> dict[str, Any]:
    """The whole sweep: {"scenario", "points"} plus the detail (`processing_time`); every
    watermark once per time in `times`. `engine`: `spark` runs the job per point on a produced
    topic; `replay` (vehicles) models the job's watermark and runs its detectors' batch forms
    on the parsed stream, no broker or Spark (`replay_point`). `entities`, `duration_s`:
    the stream's, overriding the scenario's.
    `on_point(report)` gets the report so far after each point, so a run that fails later
    (a Spark worker lost on a loaded machine) keeps the points it measured."""
    if scenario not in SCENARIOS:
        raise StreamsimError(
            f"--scenario {scenario!r}: the lab knows {', '.join(sorted(SCENARIOS))}"
        )
    if engine not in ENGINES or (engine == "replay" and scenario not in REPLAY_STREAM):
        raise StreamsimError(f"--engine {engine!r}: spark, or replay for vehicles")
    from pipeline.config import PipelineConfig

    lab_job = SCENARIOS[scenario]
    base_cfg = load_model(PipelineConfig, lab_job.pipeline_file)
    stream = simulate(lab_job.scenario_file, events, seed, stack, entities, duration_s)
    points: list[dict[str, Any]] = []
    report: dict[str, Any] = {
        "scenario": scenario,
        "points": points,
        "events": len(stream.values),
        "engine": engine,
        "max_offsets": max_offsets,
        # how long the stream runs: its records' send times, first to last
        "span_s": round((max(stream.emit_ms) - min(stream.emit_ms)) / 1000, 1)
        if stream.emit_ms
        else 0.0,
        "processing_time": processing_time_view(stream),
    }
    runs = [(time, watermark) for time in times for watermark in watermarks]
    if engine == "replay":
        replay_sweep(stream, base_cfg, runs, max_offsets, progress, on_point, report)
        return report
    from pipeline.session import spark_session

    topic = f"lab.{scenario}-{uuid.uuid4().hex[:8]}"
    report["topic"] = topic
    produce(stack, topic, stream, partitions=2)
    spark = spark_session(stack, app="lab-watermark")
    for i, (time, watermark) in enumerate(runs):
        if progress is not None:
            progress(
                i, len(runs), watermark[0] if time == "event_time" else f"{watermark[0]} ({time})"
            )
        points.append(
            run_point(
                spark,
                stack,
                base_cfg,
                topic,
                watermark,
                stream,
                work,
                max_offsets,
                lab_job,
                time,
            )
        )
        if on_point is not None:
            on_point(report)
    return report


def chart(report: dict[str, Any]) -> dict[str, Any]:
    """Vega-Lite: completeness and recall (y) against result latency p50 (x), one point per
    watermark, labelled."""
    rows = []
    for p in report["points"]:
        for metric in ("completeness", "recall"):
            if p[metric] is not None and p["latency_ms"]["p50"] is not None:
                rows.append(
                    {
                        "watermark_s": p["watermark_s"],
                        "latency_s": p["latency_ms"]["p50"] / 1000,
                        "metric": metric,
                        "value": p[metric],
                    }
                )
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "title": f"{report['scenario']}: waiting for late events vs discarding them",
        "width": 500,
        "height": 300,
        "data": {"values": rows},
        "layer": [
            {
                "mark": {"type": "line", "point": True},
                "encoding": {
                    "x": {
                        "field": "latency_s",
                        "type": "quantitative",
                        "title": "result latency p50 (s of stream time past window end)",
                    },
                    "y": {"field": "value", "type": "quantitative", "title": "share"},
                    "color": {"field": "metric", "type": "nominal"},
                },
            },
            {
                "mark": {"type": "text", "dy": -10},
                "encoding": {
                    "x": {"field": "latency_s", "type": "quantitative"},
                    "y": {"field": "value", "type": "quantitative"},
                    "text": {"field": "watermark_s", "type": "quantitative", "format": ".0f"},
                },
            },
        ],
    }


def save(report: dict[str, Any], out: Path) -> list[Path]:
    from streamsim.loadtest.charts import _HTML

    out.mkdir(parents=True, exist_ok=True)
    spec = json.dumps(chart(report))
    files = [out / "report.json", out / "lateness.vl.json", out / "lateness.html"]
    files[0].write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    files[1].write_text(spec)
    files[2].write_text(_HTML.format(title="lateness", spec=spec))
    return files


# --- the replay engine -----------------------------------------------------------------------
#: The default stream of a replayed sweep (`engine="replay"`): fewer vehicles over a longer
#: drive than the scenario's own (2,000 vehicles, 10 minutes), so the stream spans more event
#: time than the longest default watermark (10 min) and that watermark closes windows: about
#: 165,000 readings over 65 minutes, fewer than the Spark sweep's 200,000.
REPLAY_STREAM = {"vehicles": {"entities": 50, "duration_s": 3900.0}}
#: Records per replayed micro-batch: about 6 s of that fleet's event time, the batch a live
#: job with a few seconds' trigger sees (not the Spark replay's 5,000, minutes of it).
REPLAY_BATCH = 250
ENGINES = ("spark", "replay")


def readings_frame(stream: Stream) -> pd.DataFrame:
    """The stream's records parsed once, in arrival (emit) order, with their send time
    (`kafka_ts`); records without a vehicle, id or event time left out (the job's dead
    letters)."""
    frame = pd.DataFrame.from_records([orjson.loads(v) for v in stream.values])
    frame["kafka_ts"] = np.asarray(stream.emit_ms, dtype=np.int64)
    keep = frame[["vehicle_id", "event_id", "event_time"]].notna().all(axis=1)
    frame = frame[keep].reset_index(drop=True)
    frame["event_time"] = frame["event_time"].astype(np.int64)
    return frame


def on_time(frame: pd.DataFrame, time: str) -> pd.DataFrame:
    """`frame` with `event_time` the time the job windows on: the device's clock, or less the
    device's estimated offset (`detectors.clock.estimate`: the lower envelope of send time minus
    event time over the device's records sent before, the figures of `pipeline.clock`'s batch
    form; the streaming job's table lags it by up to a slide)."""
    if time == "event_time":
        return frame
    from detectors.clock import CORRECTED, estimate

    fixed = estimate(frame, device="vehicle_id", kafka_ts="kafka_ts")
    fixed["device_event_time"] = fixed["event_time"]
    fixed["event_time"] = fixed[CORRECTED].astype(np.int64)
    return fixed


def batch_watermarks(times_ms: np.ndarray, batch: int, watermark_ms: int) -> tuple[Any, ...]:
    """Spark's watermark per micro-batch of `batch` records in arrival order: the largest event
    time of the batches before, less the delay (0 before the first batch's), plus a final
    no-data batch. Returns (batch of each record, watermark per batch (one more than the
    batches), largest event time read by the end of each batch (likewise)).

    >>> b, wm, seen = batch_watermarks(np.array([10, 50, 20, 30, 90, 40]), 2, 15)
    >>> b.tolist(), wm.tolist(), seen.tolist()
    ([0, 0, 1, 1, 2, 2], [0, 35, 35, 75], [50, 50, 90, 90])
    """
    n = len(times_ms)
    batch_of = np.arange(n) // batch
    batch_max = np.maximum.reduceat(times_ms, np.arange(0, n, batch)) if n else np.array([0])
    seen = np.maximum.accumulate(batch_max)
    watermarks = np.maximum.accumulate(
        np.concatenate([[0], np.maximum(seen - watermark_ms, 0)])
    ).astype(np.int64)
    return batch_of, watermarks, np.concatenate([seen, seen[-1:]]).astype(np.int64)


def late_watermarks(watermarks: np.ndarray) -> np.ndarray:
    """Per batch, the watermark its stateful operators drop late rows against: the previous
    batch's (Spark's watermark for late events, SPARK-40925), one batch behind the one that
    evicts (closes windows, fires timers).

    >>> late_watermarks(np.array([0, 35, 35, 75])).tolist()
    [0, 0, 35, 35]
    """
    return np.concatenate([[0], watermarks[:-1]]).astype(np.int64)


def window_latencies(
    kept: pd.DataFrame, windows: list[tuple[int, int]], watermarks: np.ndarray, seen: np.ndarray
) -> list[float]:
    """Per (vehicle, window) with a counted reading: the largest event time read by the batch
    whose watermark first reaches the window's end (Spark's append mode emits it there), minus
    the end; windows the watermark never passes are left out (still open)."""
    times = kept["event_time"].to_numpy(np.int64)
    codes = pd.factorize(kept["vehicle_id"])[0]
    ends: list[np.ndarray] = []
    for i, (length, slide) in enumerate(windows):
        first = (times - length) // slide + 1  # the earliest window start covering the reading
        for k in range(length // slide):
            end = (first + k) * slide + length
            key = pd.DataFrame({"v": codes, "w": i, "end": end}).drop_duplicates()
            ends.append(key["end"].to_numpy(np.int64))
    if not ends:
        return []
    end = np.concatenate(ends)
    emitted = np.searchsorted(watermarks, end, side="left")
    closed = emitted < len(watermarks)
    return (seen[emitted[closed]] - end[closed]).astype(float).tolist()


def replay_point(
    frame: pd.DataFrame,
    watermark: tuple[str, int],
    batch: int,
    detectors: Any,
    windows: list[tuple[int, int]],
    truth: pd.DataFrame,
    time: str,
) -> dict[str, Any]:
    """One watermark's point without Spark: the job's watermark semantics on the parsed records
    (`frame`, on `time` already) in micro-batches of `batch` in arrival order, and its detectors'
    batch forms (`vehicle_alerts_batch`, the alerts of the streaming rules over the same
    readings) over the readings it would have counted and judged."""
    from pipeline.jobs.vehicles.rules import vehicle_alerts_batch

    times = frame["event_time"].to_numpy(np.int64)
    batch_of, watermarks, seen = batch_watermarks(times, batch, watermark[1])
    late = times <= late_watermarks(watermarks)[batch_of]
    kept = frame[~late].drop_duplicates("event_id")  # duplicates within the watermark dropped
    # The rules judge a reading once the watermark passes it: the final no-data batch's at most.
    judged = kept[kept["event_time"] <= watermarks[-1]]
    alerts = vehicle_alerts_batch(judged, detectors) if len(judged) else pd.DataFrame()
    rows = (
        []
        if alerts.empty
        else [
            {"label": label, "event_ids": list(ids)}
            for label, ids in zip(alerts["label"], alerts["event_ids"], strict=True)
        ]
    )
    recall, precision = score(rows, truth)
    read = len(frame)
    return {
        "time": time,
        "watermark_s": watermark[1] / 1000,
        "completeness": round(1 - int(late.sum()) / read, 6) if read else None,
        "late_dropped": int(late.sum()),
        "parity": None,  # the replay's windows are the oracle's on the counted readings
        "recall": recall,
        "precision": precision,
        "latency_ms": _percentiles(window_latencies(kept, windows, watermarks, seen)),
    }


def replay_sweep(
    stream: Stream,
    base_cfg: Any,
    runs: list[tuple[str, tuple[str, int]]],
    batch: int,
    progress: Any,
    on_point: Any,
    report: dict[str, Any],
) -> None:
    """Every (time, watermark) of `runs` replayed on one parsed stream (parsed and corrected
    once per time), points appended to `report["points"]`."""
    from pipeline.settings import duration_ms

    settings = base_cfg.vehicles
    detectors = settings.enabled_detectors()
    windows = [
        (duration_ms(w.length), duration_ms(w.slide or w.length)) for w in settings.stats_windows
    ]
    parsed = readings_frame(stream)
    frames: dict[str, pd.DataFrame] = {}
    for i, (time, watermark) in enumerate(runs):
        if progress is not None:
            progress(
                i, len(runs), watermark[0] if time == "event_time" else f"{watermark[0]} ({time})"
            )
        if time not in frames:
            frames[time] = on_time(parsed, time)
        report["points"].append(
            replay_point(frames[time], watermark, batch, detectors, windows, stream.truth, time)
        )
        if on_point is not None:
            on_point(report)
