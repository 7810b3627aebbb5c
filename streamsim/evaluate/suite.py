"""`streamsim evaluate SCENARIO --suite FILE`: a scenario over several seeds and config
variants, at full speed, scored per type: mean and worst figures, against the suite's bar.

Each run simulates into a temporary directory (JSONL, `--speed max`) and puts its decisions
through one path:
- `endpoint` (cards): the fraud endpoint's own service in process (`api.fraud.service`: the
  same decider, rules and state as `POST /v1/transactions`, without HTTP), fed the POS
  requests in emit order, with the run's cardholder profiles loaded as from `cards.profiles`;
- `pipeline` (vehicles): the vehicles job's detectors, from its pipeline config, in
  their vectorised batch form (the job's batch oracle) over the run's readings. Spark itself
  is not started per run (minutes each); `streamsim evaluate SCENARIO` scores a live job;
- `pipeline` (sensor fleet): the rules `streamsim evaluate sensors` scores
  (`streamsim.evaluate.sensors`), batch form, over the run's readings, each event once.

Each run is scored with `streamsim.evaluate.scoring` (majority hits, incident precision, null
precision without detections). Per type the suite reports the mean over runs and the worst run
(the lowest of each figure; a run without support of a type is left out of its figures;
precision is averaged over runs that had detections). `hard_negative_rate` = detections that
touched a hard negative and hit no incident / hard-negative events delivered, over all runs.
`ok`: every type's worst recall and worst incident precision at least the suite's thresholds,
and the hard-negative rate at most its threshold.

Splits: a suite is a `tuning` or a `report` split. Rules are tuned on the tuning split's seeds
only; figures are quoted from the report split, whose seeds are disjoint (checked when both
files sit side by side: `disjoint_seeds`).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import orjson
import pandas as pd
from pydantic import Field, model_validator

from core.config import StackConfig, load_model
from core.config.base import Settings
from core.contracts import labels
from core.errors import StreamsimError
from streamsim.evaluate.scoring import RUNNING_MS, Judge, score_path

FIGURES = ("precision", "incident_precision", "recall", "f1")
SCENARIO_LABELS = {
    "cards": labels.CARD_FRAUDS,
    "vehicles": labels.VEHICLE_FAULTS,
    "sensors": labels.SENSOR_FAULTS,
}


class Variant(Settings):
    """A config variant: scenario settings merged onto the suite's scenario file."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", description="Its name in the report.")
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="Scenario keys to merge (e.g. domain.fraud rates)."
    )


class Thresholds(Settings):
    recall: float = Field(0.85, ge=0, le=1, description="Worst recall of every type, at least.")
    incident_precision: float = Field(
        0.85, ge=0, le=1, description="Worst incident precision of every type, at least."
    )
    hard_negative_rate: float = Field(
        0.01, ge=0, le=1, description="Hard-negative alerts per hard-negative event, at most."
    )


class SuiteConfig(Settings):
    """A suite file (`config/suites/*.yaml`)."""

    kind: Literal["suite"] = "suite"
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", description="The suite's name.")
    scenario: Path = Field(description="The scenario YAML the runs start from.")
    split: Literal["tuning", "report"] = Field(description="Tune on one; report the other.")
    path: Literal["endpoint", "pipeline"] = Field(description="Which decisions are scored.")
    seeds: list[int] = Field(min_length=1, description="One run per seed and variant.")
    entities: int | None = Field(None, ge=1, description="Entities per run (unset: the file's).")
    duration_s: float | None = Field(
        None, gt=0, description="Simulated seconds per run (unset: the file's)."
    )
    variants: list[Variant] = Field(default_factory=lambda: [Variant(name="default")], min_length=1)
    pipeline: Path | None = Field(
        None, description="Pipeline config of the detectors (path pipeline; unset: the job's)."
    )
    settings: Path | None = Field(
        None, description="The fraud endpoint's settings (path endpoint; unset: its defaults)."
    )
    horizon_ms: float | None = Field(
        None, description="Incidents this young at the run's end are open (not scored)."
    )
    running_ms: float | None = Field(
        None,
        gt=0,
        description="With horizon_ms: an incident whose last reading falls this "
        "close to the run's end is still running (unset: the scoring's default, for 1 Hz).",
    )
    thresholds: Thresholds = Field(default_factory=Thresholds)

    @model_validator(mode="after")
    def _distinct(self) -> SuiteConfig:
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds: each once")
        if len({v.name for v in self.variants}) != len(self.variants):
            raise ValueError("variants: each name once")
        return self


def load_suite(path: str | Path) -> SuiteConfig:
    return load_model(SuiteConfig, path)


def disjoint_seeds(a: SuiteConfig, b: SuiteConfig) -> bool:
    """Whether two suites share no seed."""
    return not set(a.seeds) & set(b.seeds)


Progress = Callable[[str], None]


def run_suite(
    suite: SuiteConfig,
    scenario: str,
    stack: StackConfig,
    *,
    seeds: list[int] | None = None,
    entities: int | None = None,
    duration_s: float | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run every seed x variant and report the suite JSON of docs/design.md (plus
    `runs_detail` and `chart`, a Vega-Lite spec). `seeds`, `entities`, `duration_s` shrink a
    suite (tests)."""
    from scenarios.catalog import ScenarioConfig

    base = load_model(ScenarioConfig, suite.scenario)
    name = base.name
    if scenario.replace("-", "_") != name:
        raise StreamsimError(f"suite {suite.name} runs {name}, not {scenario}")
    kinds = list(SCENARIO_LABELS[name])
    runs: list[dict[str, Any]] = []
    hard_events = hard_alerts = 0
    for variant in suite.variants:
        for seed in seeds or suite.seeds:
            started = time.monotonic()
            truth, detections = _one_run(suite, base, variant, seed, stack, entities, duration_s)
            scores = score_path(
                detections, truth, kinds, suite.horizon_ms, None, suite.running_ms or RUNNING_MS
            )
            marked, touched = _hard_negatives(detections, truth)
            hard_events += marked
            hard_alerts += touched
            runs.append(
                {
                    "variant": variant.name,
                    "seed": seed,
                    "types": scores,
                    "hard_negative_events": marked,
                    "hard_negative_alerts": touched,
                }
            )
            if progress is not None:
                progress(
                    f"{variant.name} seed {seed}: "
                    + ", ".join(f"{k} r={v['recall']:.2f}" for k, v in scores.items())
                    + f" ({time.monotonic() - started:.0f} s)"
                )
    types = {k: _summary([r["types"][k] for r in runs]) for k in kinds}
    rate = hard_alerts / hard_events if hard_events else 0.0
    t = suite.thresholds
    ok = rate <= t.hard_negative_rate and all(
        (f["worst"]["recall"] or 0.0) >= t.recall
        and (f["worst"]["incident_precision"] or 0.0) >= t.incident_precision
        for f in types.values()
    )
    report: dict[str, Any] = {
        "suite": suite.name,
        "scenario": name,
        "split": suite.split,
        "runs": len(runs),
        "types": types,
        "hard_negative_rate": round(rate, 5),
        "ok": ok,
    }
    report["runs_detail"] = runs
    report["path"] = suite.path
    report["thresholds"] = t.model_dump()
    report["chart"] = chart(report)
    return report


def _summary(per_run: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Mean and worst of each figure: recall and F1 over the runs that had support, precision
    over those that had detections (a false alert in a run without incidents counts).

    >>> runs = [{"support": 0, "precision": 0.0, "incident_precision": 0.0, "recall": 0.0,
    ...          "f1": 0.0}, {"support": 2, "precision": 1.0, "incident_precision": 1.0,
    ...          "recall": 0.5, "f1": 0.667}]
    >>> _summary(runs)["worst"]
    {'precision': 0.0, 'incident_precision': 0.0, 'recall': 0.5, 'f1': 0.667}
    """
    supported = [f for f in per_run if f["support"] > 0] or per_run
    out: dict[str, dict[str, float | None]] = {"mean": {}, "worst": {}}
    for key in FIGURES:
        runs = per_run if key in ("precision", "incident_precision") else supported
        values = [f[key] for f in runs if f.get(key) is not None]
        out["mean"][key] = round(float(np.mean(values)), 4) if values else None
        out["worst"][key] = round(float(np.min(values)), 4) if values else None
    return out


def _hard_negatives(detections: pd.DataFrame, truth: pd.DataFrame) -> tuple[int, int]:
    """(hard-negative events delivered, detections touching one that hit no incident)."""
    if "hard_negative" not in truth.columns:
        return 0, 0
    sent = truth[truth["dropped"].isna() & truth["duplicate_of"].isna()]
    marked = set(sent.loc[sent["hard_negative"].notna(), "event_id"])
    if not marked or detections.empty:
        return len(marked), 0
    judge = Judge(truth)
    touched = sum(
        1
        for label, ids in zip(detections["label"], detections["event_ids"], strict=True)
        if marked.intersection(ids) and judge.hit(label, ids) is None
    )
    return len(marked), touched


def run_data(
    suite: SuiteConfig,
    base: Any,
    variant: Variant,
    seed: int,
    run_prefix: str,
    entities: int | None = None,
    duration_s: float | None = None,
) -> dict[str, Any]:
    """One run's scenario data: the suite's scenario, its `entities` and `duration_s`, the
    variant's overrides (which may set both too), then `entities` and `duration_s` given
    here (a shrunk suite, in tests), the seed and a run id."""
    from scenarios.catalog import deep_merge

    def sized(entities: int | None, duration_s: float | None) -> dict[str, Any]:
        return {k: v for k, v in (("entities", entities), ("duration_s", duration_s)) if v}

    data = {**base.model_dump(mode="json"), **sized(suite.entities, suite.duration_s)}
    data = deep_merge(data, variant.overrides)
    data.update(
        sized(entities, duration_s), seed=seed, run_id=f"{run_prefix}-{variant.name}-{seed}"
    )
    return data


def _one_run(
    suite: SuiteConfig,
    base: Any,
    variant: Variant,
    seed: int,
    stack: StackConfig,
    entities: int | None,
    duration_s: float | None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    from scenarios.catalog import ScenarioConfig, build_scenario
    from simulators.engine import Engine
    from simulators.sinks import JsonlSink

    data = run_data(suite, base, variant, seed, f"suite-{suite.name}", entities, duration_s)
    cards = base.name == "cards"
    if cards and suite.path == "endpoint":
        data["domain"]["delivery"] = "http"  # POS requests, PAN included ...
    cfg = ScenarioConfig.model_validate(data)
    with tempfile.TemporaryDirectory(prefix="suite-") as tmp:
        scenario = build_scenario(cfg, stack)
        if cards:
            scenario.post = False  # type: ignore[attr-defined]  # ... to the sink, not HTTP
        Engine(scenario, cfg, JsonlSink(tmp), speed="max").run()
        truth = pd.DataFrame(_lines(Path(tmp) / "truth.jsonl"))
        if cards and suite.path == "endpoint":
            detections = _endpoint(Path(tmp), stack, suite.settings)
        elif base.name == "sensors" and suite.path == "pipeline":
            detections = _sensor_rules(Path(tmp), truth, stack, suite.pipeline)
        elif not cards and suite.path == "pipeline":
            detections = _vehicle_rules(Path(tmp), suite.pipeline)
        else:
            raise StreamsimError(f"no {suite.path} path for {base.name} in a suite")
    return truth, detections


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("rb") as f:
        for line in f:
            yield orjson.loads(line)


def _endpoint(folder: Path, stack: StackConfig, settings: Path | None) -> pd.DataFrame:
    """The endpoint's decisions (with `settings`, else its defaults) on the run's requests, in
    emit order; its alerts as detections (the event ids each names)."""
    from api.fraud.models import TransactionRequest
    from api.fraud.service import FraudService
    from api.fraud.settings import ApiSettings, load_secrets

    chosen = load_model(ApiSettings, settings) if settings else ApiSettings()
    service = FraudService(chosen, load_secrets(stack))
    profiles = folder / "profiles.jsonl"
    if profiles.exists():
        for record in _lines(profiles):
            service.profiles.put(record)
    rows = []
    with (folder / "events.jsonl").open("rb") as f:
        for line in f:
            tx = TransactionRequest.model_validate_json(line)
            body = orjson.loads(service.handle(tx))
            for a in body["evidence"].get("alerts") or []:
                rows.append({"label": a.get("label"), "event_ids": a.get("event_ids")})
    frame = pd.DataFrame(rows, columns=["label", "event_ids"])
    frame["detected_sim_ms"] = np.nan
    return frame


def _vehicle_rules(folder: Path, pipeline: Path | None) -> pd.DataFrame:
    """The vehicles job's enabled detectors, batch form, over the run's readings."""
    from pipeline.config import PipelineConfig
    from pipeline.jobs.vehicles.rules import vehicle_alerts_batch

    cfg = load_model(PipelineConfig, pipeline or Path("config/pipelines/vehicles.yaml"))
    job = cfg.vehicles
    assert job is not None
    readings = pd.DataFrame(_lines(folder / "events.jsonl"))
    alerts = vehicle_alerts_batch(readings, job.enabled_detectors())
    if alerts.empty:
        return pd.DataFrame({"label": [], "event_ids": [], "detected_sim_ms": []})
    return pd.DataFrame(
        {"label": alerts["label"], "event_ids": alerts["event_ids"], "detected_sim_ms": np.nan}
    )


def _sensor_rules(
    folder: Path, truth: pd.DataFrame, stack: StackConfig, pipeline: Path | None
) -> pd.DataFrame:
    """The sensors rules (`streamsim.evaluate.sensors`) over the readings, in the form the
    job's `sensors.rules_form` names: the vectorised batch form for `python`, the engine
    form's batch run in a local Spark session for `engine`."""
    from pipeline.config import PipelineConfig
    from streamsim.evaluate import sensors

    cfg = load_model(PipelineConfig, pipeline or Path("config/pipelines/sensors.yaml"))
    if cfg.sensors.rules_form == "engine":
        alerts = sensors.engine_rules(folder / "events.jsonl", cfg, stack)
        return sensors.alert_detections(alerts, truth)
    columns = list(sensors.COLUMNS)
    readings = pd.DataFrame.from_records(
        ({k: r.get(k) for k in columns} for r in _lines(folder / "events.jsonl")), columns=columns
    )
    return sensors.detections(readings.drop_duplicates("event_id", ignore_index=True), truth)


def chart(report: dict[str, Any]) -> dict[str, Any]:
    """A Vega-Lite spec: per type, the mean (bar) and worst (tick) of each figure, with the
    suite's thresholds as rules."""
    values = [
        {"type": kind, "figure": key, "stat": stat, "value": figures[stat][key]}
        for kind, figures in report["types"].items()
        for stat in ("mean", "worst")
        for key in FIGURES
        if figures[stat][key] is not None
    ]
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "title": f"{report['suite']} ({report['split']} split, {report['runs']} runs)",
        "data": {"values": values},
        "facet": {"column": {"field": "figure", "type": "nominal"}},
        "spec": {
            "layer": [
                {
                    "transform": [{"filter": "datum.stat == 'mean'"}],
                    "mark": "bar",
                    "encoding": {
                        "x": {"field": "type", "type": "nominal"},
                        "y": {"field": "value", "type": "quantitative",
                              "scale": {"domain": [0, 1]}},
                    },
                },
                {
                    "transform": [{"filter": "datum.stat == 'worst'"}],
                    "mark": {"type": "tick", "color": "firebrick", "thickness": 3},
                    "encoding": {
                        "x": {"field": "type", "type": "nominal"},
                        "y": {"field": "value", "type": "quantitative"},
                    },
                },
            ]
        },
    }  # fmt: skip


def save_suite(report: dict[str, Any], stack: StackConfig) -> tuple[Path, Path]:
    """The report (JSON) and its chart (Vega-Lite JSON) under <dirs.data>/evaluations/."""
    folder = stack.dirs.data / "evaluations"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = folder / f"suite-{report['suite']}-{stamp}.json"
    path.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    spec = folder / f"suite-{report['suite']}-{stamp}.vl.json"
    spec.write_bytes(orjson.dumps(report["chart"], option=orjson.OPT_INDENT_2))
    return path, spec
