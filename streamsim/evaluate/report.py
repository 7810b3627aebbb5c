"""The evaluation report: the contract's JSON (docs/design.md), built from the sources and the
scoring."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pandas as pd

from core.config import StackConfig, load_model
from core.contracts import labels, topics
from core.contracts.events import PIPELINE_PROGRESS
from core.errors import StreamsimError
from core.kafka.reader import latest_run, read_topic
from pipeline.config import PipelineConfig
from pipeline.late_drops import QUERY_SUFFIX as LATE_DROPS
from streamsim.evaluate import clock, foreign, sensors, shipping
from streamsim.evaluate import verdicts as pos_verdicts
from streamsim.evaluate.scoring import (
    RUNNING_MS,
    hard_negative_alerts,
    hard_negative_alerts_by_label,
    score_path,
    to_sim_ms,
    unknown_labels,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: What each scenario's evaluation reads and scores. `oracle`: the pipeline config whose
#: batch oracle applies (parity, and the late drops per label); `horizon_ms`: see
#: `scoring.open_incidents` (an overheating takes up to 10 minutes to pass 105 °C for 60 s);
#: `running_ms`: see `open_incidents` too; `batch`: the pipeline path is the detectors' batch
#: form over the run's topics, read to their end, by this function (`streamsim.evaluate.
#: shipping`: a voyage's readings land days late; `streamsim.evaluate.sensors`);
#: `arrivals`: incident -> when its data first arrived, from truth; `job`: the Spark job whose
#: alerts on the alerts topic, where the run has any, are scored instead of the batch form;
#: `unscored`: the job's alert labels that are no fault (a device's own low-battery report):
#: counted apart (`unscored_alerts`), not scored as alerts of no type; `clock`: the report
#: has the skew estimator's `clock` block (`streamsim.evaluate.clock`).
SCENARIOS: dict[str, dict[str, Any]] = {  # label types come from the contracts
    "cards": {
        "labels": list(labels.CARD_FRAUDS),
        "endpoint_topic": topics.CARDS_ACTIVITY.name,
        "sketches": True,
    },
    "vehicles": {
        "labels": list(labels.VEHICLE_FAULTS),
        "endpoint_topic": None,
        "oracle": Path("config/pipelines/vehicles.yaml"),
        "horizon_ms": 600_000,
        "clock": True,
    },
    "shipping": {
        "labels": list(labels.SHIPPING_FAULTS),
        "endpoint_topic": None,
        "horizon_ms": shipping.HORIZON_MS,
        "running_ms": shipping.RUNNING_MS,
        "batch": shipping.batch_detections,
        "arrivals": shipping.first_arrivals,
        "job": "shipping",
    },
    "sensors": {
        "labels": list(labels.SENSOR_FAULTS),
        "endpoint_topic": None,
        "horizon_ms": sensors.HORIZON_MS,
        "running_ms": sensors.RUNNING_MS,
        "batch": sensors.batch_detections,
        "job": "sensors",
        "unscored": ("low_battery",),
        "clock": True,
    },
}
ALERTS_TOPIC = topics.ALERTS.name
#: Whose verdicts the endpoint path scores: `auto` (the endpoint's on its topic, else those the
#: simulator recorded in POS mode), `endpoint` or `simulator` only.
VERDICT_SOURCES = ("auto", "endpoint", "simulator")
#: The path of a foreign job's alerts in the report.
FOREIGN = "foreign"
METRICS_TOPIC = topics.METRICS.name


def evaluate(
    stack: StackConfig,
    scenario: str,
    spark: SparkSession | None = None,
    pipeline: PipelineConfig | None = None,
    since: Mapping[str, Mapping[int, int]] | None = None,
    id_prefix: str | None = None,
    endpoint_topic: str | None = None,
    alerts: Iterable[bytes | str | None] | None = None,
    alerts_source: str = "",
    verdicts: str = "auto",
    verdicts_topic: str | None = None,
) -> dict[str, Any]:
    """Score the scenario's latest run (the run of `id_prefix`, when given: a caller that
    knows its run names it, since another run of the scenario may finish later on a shared
    stack): both paths, late drops, hard negatives; where a batch oracle applies, parity and
    the late drops per label too (with `spark`, or a session of its own; `pipeline`: the
    job's config, default the scenario's oracle file). `endpoint_topic`: where the endpoint
    published its decisions, if not the scenario's default (an endpoint with settings of its
    own, as a panel run's). With `alerts` (raw records, from `alerts_source`), a foreign
    job's alerts are scored instead of our paths (`foreign_report`). `verdicts`: see
    `VERDICT_SOURCES`; the simulator's records are read from `verdicts_topic` (default
    `cards.verdicts`) and scored by `streamsim.evaluate.verdicts`.

    A rerun with the same seed reuses the event ids: decisions count only from the run's start
    (wall clock), and `since` (topic -> partition -> offset, e.g. the ends before the run)
    reads truth and decisions from there on."""
    since = since or {}
    name = scenario.replace("-", "_")
    if name not in SCENARIOS:
        raise StreamsimError(f"no evaluation for {scenario!r}; known: {', '.join(SCENARIOS)}")
    spec = SCENARIOS[name]
    metrics = read_topic(stack, METRICS_TOPIC)
    run = latest_run(metrics, name, id_prefix)
    if run is None:
        which = f"{name} ({id_prefix}*)" if id_prefix else name
        raise StreamsimError(
            f"no finished run of {which} in the {METRICS_TOPIC} topic: run "
            f"`streamsim simulate config/scenarios/{name}.yaml` (or `streamsim demo --scenario "
            f"{scenario}`) first"
        )
    prefix, anchor = run["id_prefix"], run["anchor"]
    truth_topic = topics.truth(name).name
    if spec.get("batch"):  # weeks of a fleet: only the columns scoring needs
        truth = shipping.read_truth(stack, truth_topic, prefix, since.get(truth_topic))
    else:
        truth = _frame(
            [
                r
                for r in read_topic(stack, truth_topic, since=since.get(truth_topic))
                if _ours(r, prefix)
            ]
        )
    if truth.empty:
        raise StreamsimError(f"{truth_topic} holds no records of the latest run ({prefix}*)")
    if alerts is not None:
        return foreign_report(name, run, truth, alerts, alerts_source)

    if verdicts not in VERDICT_SOURCES:
        raise StreamsimError(f"verdicts: one of {', '.join(VERDICT_SOURCES)}, not {verdicts!r}")
    paths: dict[str, pd.DataFrame] = {}
    recorded: dict[str, Any] | None = None
    if spec["endpoint_topic"]:
        topic = endpoint_topic or spec["endpoint_topic"]
        decisions = (
            []
            if verdicts == "simulator"
            else [r for r in read_topic(stack, topic, since=since.get(topic)) if _ours(r, prefix)]
        )
        if decisions:
            paths["endpoint"] = _endpoint_detections(decisions, anchor)
        elif verdicts != "endpoint":
            vtopic = verdicts_topic or topics.CARDS_VERDICTS.name
            found = pos_verdicts.latest(read_topic(stack, vtopic, since=since.get(vtopic)), prefix)
            if found:
                paths["endpoint"] = _detections(pos_verdicts.detection_rows(found, truth), anchor)
                recorded = pos_verdicts.summary(
                    found, paths["endpoint"], truth, f"simulator ({vtopic})"
                )
            elif verdicts == "simulator":
                raise StreamsimError(
                    f"{vtopic} holds no verdicts of the run ({prefix}*): was it a POS-mode "
                    "run (domain.delivery: http)?"
                )
    arrivals = spec["arrivals"](truth) if spec.get("arrivals") else None
    job_alerts = (
        _pipeline_alerts(stack, since, anchor, prefix, spec.get("job"))
        if spec.get("job") or not spec.get("batch")
        else []
    )
    unscored = Counter(
        a.get("label") for a in job_alerts if a.get("label") in spec.get("unscored", ())
    )
    job_alerts = [a for a in job_alerts if a.get("label") not in unscored]
    form = "streaming" if job_alerts or not spec.get("batch") else "batch"
    if form == "batch":
        paths["pipeline"] = spec["batch"](stack, prefix, truth, since)
    else:
        paths["pipeline"] = _alert_detections(job_alerts, anchor)

    report = _scored(name, run, truth, paths, arrivals)
    if recorded is not None:
        if recorded["attributed"]:
            pos_verdicts.blank_precision(report["paths"]["endpoint"])
        report["verdicts"] = recorded
    report["late_dropped"] = _late_dropped(metrics, anchor["wall_ms"])
    if spec.get("unscored"):
        report["unscored_alerts"] = {label: unscored[label] for label in spec["unscored"]}
    if spec.get("clock"):
        report["clock"] = _clock(stack, name, truth, truth_topic, prefix, since)
    scores = report["paths"]
    if spec.get("batch"):
        # batch: the detectors over the topics; streaming: the alerts of job `spec["job"]`
        report["pipeline_form"] = form
        late = pd.Series([a.get("label") for a in job_alerts if a.get("late")]).value_counts()
        touched = hard_negative_alerts_by_label(paths["pipeline"], truth)
        for label, figures in scores["pipeline"].items():
            figures["hard_negative_alerts"] = touched.get(label, 0)
            if form == "streaming":  # raised when a voyage landed, days late
                figures["late_alerts"] = int(late.get(label, 0))
    if spec.get("sketches") and (spark is not None or pipeline is not None):
        report["sketches"] = _sketches(stack, spark, pipeline, since, prefix)
    if spec.get("oracle"):
        cfg = pipeline or load_model(PipelineConfig, spec["oracle"])
        parity, late_ids = _oracle(stack, cfg, spark)
        report["parity"] = parity
        late_labels = truth.loc[truth["event_id"].isin(late_ids)].drop_duplicates("event_id")
        late_per_label = late_labels["label"].value_counts()
        for label, figures in scores["pipeline"].items():
            figures["late_dropped"] = int(late_per_label.get(label, 0))
    return report


def _scored(
    name: str,
    run: dict[str, Any],
    truth: pd.DataFrame,
    paths: Mapping[str, pd.DataFrame],
    arrivals: pd.Series | None,
) -> dict[str, Any]:
    """The report of any detections: per path and label type the figures of `score_path`,
    hard-negative alerts and alerts of no scored type."""
    spec, anchor = SCENARIOS[name], run["anchor"]
    scores = {
        p: score_path(
            d,
            truth,
            spec["labels"],
            spec.get("horizon_ms"),
            arrivals,
            spec.get("running_ms", RUNNING_MS),
        )
        for p, d in paths.items()
    }
    return {
        "scenario": name,
        "run": {
            "id_prefix": run["id_prefix"],
            "events": run["events"],
            "speed": anchor.get("speed"),
        },
        "paths": scores,
        "hard_negative_alerts": sum(hard_negative_alerts(d, truth) for d in paths.values()),
        # false positives of no scored type (a catch-all rule), per path and label
        "unknown_label_alerts": {p: unknown_labels(d, spec["labels"]) for p, d in paths.items()},
    }


def foreign_report(
    name: str,
    run: dict[str, Any],
    truth: pd.DataFrame,
    values: Iterable[bytes | str | None],
    source: str,
) -> dict[str, Any]:
    """The report of a foreign job's alerts (`values`: raw records from `source`) on the run
    `run` of scenario `name` with its `truth`: one path, `foreign`, scored as our own alerts
    are, with hard-negative alerts per type, and `foreign`: what was read, scored and rejected
    (per reason), and the records of other runs or repeated alert ids
    (`streamsim.evaluate.foreign`)."""
    spec, anchor = SCENARIOS[name], run["anchor"]
    found = foreign.sort_out(values, spec["labels"], run["id_prefix"], anchor["wall_ms"], source)
    detections = _detections(foreign.detection_rows(found.alerts), anchor)
    arrivals = spec["arrivals"](truth) if spec.get("arrivals") else None
    report = _scored(name, run, truth, {FOREIGN: detections}, arrivals)
    touched = hard_negative_alerts_by_label(detections, truth)
    for label, figures in report["paths"][FOREIGN].items():
        figures["hard_negative_alerts"] = touched.get(label, 0)
    report["foreign"] = found.summary()
    return report


def _pipeline_alerts(
    stack: StackConfig,
    since: Mapping[str, Mapping[int, int]],
    anchor: dict[str, Any],
    prefix: str,
    job: str | None,
) -> list[dict[str, Any]]:
    """The run's alerts on the alerts topic from the pipeline (of `job`, when given), raised
    since the run started."""
    return [
        a
        for a in read_topic(stack, ALERTS_TOPIC, since=since.get(ALERTS_TOPIC))
        if a.get("source", "pipeline") == "pipeline"
        and (job is None or a.get("job") == job)
        and (a.get("detected_at") or anchor["wall_ms"]) >= anchor["wall_ms"]
        and any(e.startswith(prefix) for e in a.get("event_ids") or [])
    ]


def _oracle(
    stack: StackConfig, cfg: PipelineConfig, spark: SparkSession | None
) -> tuple[dict[str, int], set[str]]:
    """The parity summary of the job's stats, and the event ids its alerts query dropped late."""
    from pipeline.jobs.vehicles.parity import late_event_ids, vehicle_stats_parity
    from pipeline.session import spark_session

    session = spark or spark_session(stack, app="evaluate")
    try:
        parity = vehicle_stats_parity(session, stack, cfg).summary()
        late = set(late_event_ids(session, stack, cfg))
    finally:
        if spark is None:
            session.stop()
    return parity, late


#: The transaction fields the sketches and the Bloom filter read.
CARD_EVENT_COLUMNS = (
    "event_id",
    "event_time",
    "card_token",
    "merchant_id",
    "terminal_id",
    "amount",
)


def card_events(
    stack: StackConfig, topic: str, since: Mapping[str, Mapping[int, int]], prefix: str
) -> pd.DataFrame:
    """The run's transactions on `topic` (`CARD_EVENT_COLUMNS`), each event id once."""
    records = [r for r in read_topic(stack, topic, since=since.get(topic)) if _ours(r, prefix)]
    frame = pd.DataFrame.from_records(records, columns=list(CARD_EVENT_COLUMNS))
    frame = frame.dropna(subset=["event_id", "event_time"]).drop_duplicates("event_id")
    return frame.astype({"event_time": "int64", "amount": "float64"})


def _sketches(
    stack: StackConfig,
    spark: SparkSession | None,
    pipeline: PipelineConfig | None,
    since: Mapping[str, Mapping[int, int]],
    prefix: str,
) -> dict[str, Any]:
    """The `sketches` block (`streamsim.evaluate.sketches`) over the run's transactions on the
    job's input topic (with `spark`, or a session of its own), with the job's parameters."""
    from pipeline.jobs.cards.sketches import DISTINCT_OF, card_sketch_rows
    from pipeline.session import spark_session
    from streamsim.evaluate.bloom import bloom_block
    from streamsim.evaluate.sketches import sketches_block

    cfg = pipeline or load_model(PipelineConfig, Path("config/pipelines/cards.yaml"))
    events = card_events(stack, cfg.input_topics[0], since, prefix)
    key = cfg.cards.terminal_key
    session = spark or spark_session(stack, app="evaluate")
    try:
        block = sketches_block(
            session,
            events[["event_id", "event_time", "card_token", "merchant_id", "terminal_id"]],
            lambda frame: card_sketch_rows(frame, key),
            cfg.cards.sketches,
            DISTINCT_OF,
        )
        block["bloom"] = bloom_block(session, events, cfg.cards)  # `streamsim.evaluate.bloom`
    finally:
        if spark is None:
            session.stop()
    return {"source": cfg.input_topics[0], "events": len(events), **block}


def _clock(
    stack: StackConfig,
    name: str,
    truth: pd.DataFrame,
    topic: str,
    prefix: str,
    since: Mapping[str, Mapping[int, int]],
) -> dict[str, Any]:
    """The skew estimator's `clock` block, over the truth columns it needs (read again when the
    scoring's frame has fewer)."""
    if not set(clock.COLUMNS) <= set(truth.columns):
        truth = shipping.read_frame(stack, topic, clock.COLUMNS, prefix, since.get(topic))
    classes = clock.entity_classes(Path(f"config/scenarios/{name}.yaml"), truth["entity_id"])
    return clock.clock_report(truth, classes)


def save(report: dict[str, Any], stack: StackConfig) -> Path:
    """Write the report under <dirs.data>/evaluations/, where the read API finds the newest."""
    folder = stack.dirs.data / "evaluations"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{report['scenario']}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    return path


def _ours(record: dict[str, Any], prefix: str) -> bool:
    return str(record.get("event_id", "")).startswith(prefix)


def _frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame.from_records(records)


def _endpoint_detections(decisions: list[dict[str, Any]], anchor: dict[str, Any]) -> pd.DataFrame:
    rows = [
        {
            "label": a.get("label"),
            "event_ids": a.get("event_ids") or [d["event_id"]],
            "at": d["decided_at"],
        }
        for d in {d["transaction_id"]: d for d in decisions}.values()
        for a in (d.get("evidence") or {}).get("alerts") or []
    ]
    return _detections(rows, anchor)


def _alert_detections(alerts: list[dict[str, Any]], anchor: dict[str, Any]) -> pd.DataFrame:
    unique = {a["alert_id"]: a for a in alerts}.values()
    rows = [
        {"label": a.get("label"), "event_ids": a["event_ids"], "at": a.get("detected_at")}
        for a in unique
    ]
    return _detections(rows, anchor)


def _detections(rows: list[dict[str, Any]], anchor: dict[str, Any]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["label", "event_ids", "at"])
    frame["detected_sim_ms"] = to_sim_ms(frame["at"].astype("float64"), anchor)
    return frame


def _late_dropped(metrics: list[dict[str, Any]], since_wall_ms: int) -> int:
    """Input events the pipeline dropped as too late since the run started, each once: per
    query the sum of its batches' late events, then the largest over the queries (they read
    the same input with the same watermark). A job's own operator's refusals (query
    `<job>.late-drops`) are rows Spark passed: they add to that job's alerts query.

    >>> at = {"schema": PIPELINE_PROGRESS, "at": 1}
    >>> _late_dropped([at | {"query": "j.alerts", "late_events": 5},
    ...                at | {"query": "j.features", "late_events": 6},
    ...                at | {"query": "j.late-drops", "late_events": 2}], 0)
    7
    """
    per_query: dict[str, int] = {}
    for r in metrics:
        if r.get("schema") == PIPELINE_PROGRESS and r.get("at", 0) >= since_wall_ms:
            late = int(r.get("late_events", r.get("dropped_by_watermark", 0)))
            query = str(r["query"])
            if query.endswith(LATE_DROPS):
                query = query.removesuffix(LATE_DROPS) + ".alerts"
            per_query[query] = per_query.get(query, 0) + late
    return max(per_query.values(), default=0)
