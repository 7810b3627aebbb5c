"""The card rules' conformance corpus (`tests.conformance.cards`) against every form: the
Python operator's `BucketState`, the detectors' batch forms, and the engine form
(`pipeline.jobs.cards.engine`) on one batch DataFrame of all cases, in the shared Spark
session. Alert ids, event times, labels and evidence agree wherever two forms raise the same
alert (travel's distance: the engine's haversine within `HAVERSINE_LOW`..`HAVERSINE_HIGH` of
the geodesic); the engine form raises exactly the Python forms' alerts plus each case's
stated extras."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from detectors import Alert, frame_to_alerts
from detectors.cards.terminal import terminal_window_alerts, terminal_window_features
from detectors.cards.travel import travel_alerts
from detectors.cards.velocity import velocity_window_alerts, velocity_window_features
from detectors.geo import HAVERSINE_HIGH, HAVERSINE_LOW
from pipeline.jobs.cards.config import CardsSettings
from pipeline.jobs.cards.engine import batch_alerts
from pipeline.jobs.cards.state import BucketState, CardRuleParams
from pipeline.rules.alert_rows import with_alert_ids
from tests.conformance.cards import CASES, SLIDE_MS, WATERMARK_MS, Case, Tx

SETTINGS = CardsSettings(profiles_topic=None, rules_form="engine")
PARAMS = CardRuleParams(
    travel=SETTINGS.travel,
    velocity=SETTINGS.velocity,
    terminal=SETTINGS.terminal,
    slide_ms=SLIDE_MS,
    delay_ms=WATERMARK_MS,
)
SEP = "~"
COLUMNS = ("card_token", "event_id", "event_time", "amount", "merchant_id", "lat", "lon")
SCHEMA = StructType(
    [
        StructField("card_token", StringType()),
        StructField("event_id", StringType()),
        StructField("event_time", LongType()),
        StructField("amount", DoubleType()),
        StructField("merchant_id", StringType()),
        StructField("lat", DoubleType()),
        StructField("lon", DoubleType()),
        StructField("card_present", BooleanType()),
        StructField("terminal_id", StringType()),
    ]
)
BY_NAME = {case.name: case for case in CASES}
Forms = tuple[list[Alert], list[Alert], set[str], list[Tx]]


def own(case: Case) -> list[Tx]:
    """The case's transactions with cards, merchants and event ids named after it
    (`<case>~<name>`), so that all cases run in one DataFrame."""
    n = case.name
    return [
        (f"{n}{SEP}{c}", f"{n}{SEP}{i}", t, a, f"{n}{SEP}{m}", lat, lon, p)
        for c, i, t, a, m, lat, lon, p in case.txs
    ]


def bare(alert: Alert) -> tuple[str, tuple[str, ...]]:
    return alert.rule, tuple(i.split(SEP, 1)[1] for i in alert.event_ids)


def operator(case: Case) -> tuple[list[Alert], list[Tx], set[str]]:
    """`BucketState` as the job's operator runs it: one transaction per batch in arrival
    order (a card row and a merchant row), its state stored and loaded between batches, the
    watermark `WATERMARK_MS` behind the latest event time before the batch; a repeated id
    dropped ahead of it (the job's de-duplication). The transactions it took in time, and the
    ids it never took."""
    stored: bytes | None = None
    alerts: list[Alert] = []
    taken: list[Tx] = []
    seen: set[str] = set()
    latest: int | None = None
    for tx in own(case):
        card, event_id, time_ms, amount, merchant, lat, lon, present = tx
        watermark = -(2**62) if latest is None else latest - WATERMARK_MS
        bucket = BucketState.from_bytes(stored, PARAMS)
        if time_ms > watermark and event_id not in seen:
            seen.add(event_id)
            took = bucket.push(
                "c", card, event_id, time_ms, lat, lon, present, amount, "", merchant
            )
            bucket.push("m", merchant, event_id, time_ms, lat, lon, present, amount, "", card)
            if took:
                taken.append(tx)
        alerts += bucket.advance(bucket.release_point(watermark))
        stored = bucket.to_bytes()
        latest = time_ms if latest is None else max(latest, time_ms)
    bucket = BucketState.from_bytes(stored, PARAMS)
    alerts += bucket.advance(2**62)
    never = {t[1] for t in own(case)} - {t[1] for t in taken}
    return alerts, taken, never


def detectors_batch(rows: list[Tx]) -> list[Alert]:
    """The detectors' batch forms over the transactions taken."""
    frame = pd.DataFrame([r[:7] for r in rows], columns=list(COLUMNS))
    frame["card_present"] = [r[7] for r in rows]
    cards = frame.rename(columns={"card_token": "entity_id"})
    velocity = velocity_window_alerts(
        velocity_window_features(cards, SETTINGS.velocity, slide_ms=SLIDE_MS), SETTINGS.velocity
    )
    shops = frame.rename(columns={"merchant_id": "entity_id", "card_token": "card_id"})
    terminal = terminal_window_alerts(
        terminal_window_features(shops, SETTINGS.terminal, slide_ms=SLIDE_MS), SETTINGS.terminal
    )
    travel = travel_alerts(cards, SETTINGS.travel)
    return [a for part in (velocity, terminal, travel) for a in frame_to_alerts(part)]


def keyed(alerts: list[Alert]) -> dict[tuple[str, tuple[str, ...]], Alert]:
    out: dict[tuple[str, tuple[str, ...]], Alert] = {}
    for alert in alerts:
        key = bare(alert)
        assert key not in out, f"{key} raised twice"
        out[key] = alert
    return out


def same_evidence(engine: dict[str, Any], python: dict[str, Any], rule: str) -> bool:
    """Equal evidence; travel's distance (and what follows from it) within the haversine's
    bounds of the geodesic."""
    if engine.keys() != python.keys():
        return False
    loose = {"distance_km", "speed_kmh", "fastest_s"} if rule == "impossible_travel" else set()
    for name, x in engine.items():
        y = python[name]
        if name in loose and x is not None and y is not None:
            if not HAVERSINE_LOW - 1e-9 <= x / y <= HAVERSINE_HIGH + 1e-9:
                return False
        elif isinstance(x, float) or isinstance(y, float):
            if x is None or y is None or not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9):
                return False
        elif x != y:
            return False
    return True


@pytest.fixture(scope="module")
def python_forms() -> dict[str, Forms]:
    """Per case: the operator's alerts, the batch forms', the ids never taken, and the
    transactions taken."""
    out = {}
    for case in CASES:
        alerts, taken, never = operator(case)
        out[case.name] = (alerts, detectors_batch(taken), never, taken)
    return out


@pytest.fixture(scope="module")
def engine_form(spark: SparkSession, python_forms: dict[str, Forms]) -> dict[str, list[Alert]]:
    """Every case in one batch DataFrame, one Spark job, over every copy of the transactions
    the operator took in time (repeats included: the engine form drops them itself)."""
    rows = []
    for case in CASES:
        taken = {t[1] for t in python_forms[case.name][3]}
        rows += [(*t, None) for t in own(case) if t[1] in taken]
    frame = spark.createDataFrame(rows, SCHEMA)
    found = with_alert_ids(batch_alerts(frame, SETTINGS).toPandas())
    out: dict[str, list[Alert]] = {case.name: [] for case in CASES}
    for alert in frame_to_alerts(found):
        out[alert.entity_id.split(SEP, 1)[0]].append(alert)
    return out


def test_the_corpus_states_its_differences() -> None:
    """Each by-design extra says why, and is not one of the Python forms' alerts."""
    for case in CASES:
        assert not set(case.engine_extra) & set(case.alerts), case.name
        assert bool(case.engine_extra) == bool(case.why), case.name


@pytest.mark.parametrize("name", list(BY_NAME))
def test_the_python_forms_raise_the_corpus_alerts(
    name: str, python_forms: dict[str, Forms]
) -> None:
    case = BY_NAME[name]
    stateful, vectorised, never, _ = python_forms[name]
    assert {i.split(SEP, 1)[1] for i in never} == set(case.late)
    assert set(keyed(stateful)) == set(case.alerts)
    assert set(keyed(vectorised)) == set(case.alerts)
    for key, alert in keyed(stateful).items():
        other = keyed(vectorised)[key]
        assert (alert.alert_id, alert.event_time) == (other.alert_id, other.event_time)


@pytest.mark.parametrize("name", list(BY_NAME))
def test_the_engine_form_raises_the_corpus_alerts_and_its_stated_extras(
    name: str,
    python_forms: dict[str, Forms],
    engine_form: dict[str, list[Alert]],
) -> None:
    case = BY_NAME[name]
    engine = keyed(engine_form[name])
    assert set(engine) == set(case.alerts) | set(case.engine_extra)
    stateful = keyed(python_forms[name][0])
    for key, alert in engine.items():
        if key in case.engine_extra:
            continue
        other = stateful[key]
        assert (alert.alert_id, alert.event_time, alert.label) == (
            other.alert_id,
            other.event_time,
            other.label,
        )
        evidence = json.loads(json.dumps(dict(alert.evidence)))
        assert same_evidence(evidence, dict(other.evidence), alert.rule), (key, evidence)
