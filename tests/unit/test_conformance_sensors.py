"""The sensor rules' conformance corpus (`tests.conformance.sensors`) against every form: the
per-event `SensorRules`, the silence rule's bucket form `SilenceTails` (all of a case's sensors
in one bucket), the vectorised `sensor_alerts_batch`, and the engine form
(`pipeline.jobs.sensors.engine`) on one batch DataFrame of all cases, in the shared Spark
session. Alert ids, event times, event ids and evidence agree wherever two forms raise the
same alert; the engine form misses exactly the alerts each case lists as its by-design
difference."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from detectors import Alert, frame_to_alerts
from detectors.series.silence_tails import SilenceTails
from pipeline.jobs.sensors.engine import batch_alerts
from pipeline.jobs.sensors.rules import SILENT, SensorRules, sensor_alerts_batch
from pipeline.rules.alert_rows import with_alert_ids
from tests.conformance.sensors import (
    CASES,
    SLIDE,
    SPAN_MS,
    WATERMARK_MS,
    WINDOW,
    Case,
    Reading,
)

COLUMNS = ("sensor_id", "event_id", "event_time", "temperature_c", "humidity_pct", "status", "seq")
SCHEMA = StructType(
    [
        StructField("sensor_id", StringType()),
        StructField("event_id", StringType()),
        StructField("event_time", LongType()),
        StructField("temperature_c", DoubleType()),
        StructField("humidity_pct", DoubleType()),
        StructField("status", StringType()),
        StructField("seq", LongType()),
    ]
)
BY_NAME = {case.name: case for case in CASES}
Forms = tuple[list[Alert], list[Alert], set[str], list[Reading], list[Alert]]


def own(case: Case) -> list[Reading]:
    """The case's readings with its sensors named after it (`<case>/<sensor>`), so that all
    cases run in one DataFrame."""
    return [(f"{case.name}/{r[0]}", *r[1:]) for r in case.readings]


def per_event(case: Case) -> tuple[list[Alert], list[Reading], set[str], list[Alert]]:
    """`SensorRules` per sensor, one reading per batch in arrival order, the watermark
    `WATERMARK_MS` behind the latest event time before it; the readings it took in time, the
    ids it never took (behind the watermark on every arrival), and the alerts of
    `SilenceTails` fed the same batches."""
    rules: dict[str, SensorRules] = {}
    tails = SilenceTails(SILENT)
    alerts: list[Alert] = []
    silences: list[Alert] = []
    taken: list[Reading] = []
    latest: int | None = None
    for row in own(case):
        sensor, event_id, event_time, temperature, humidity, status, seq = row
        watermark = None if latest is None else latest - WATERMARK_MS
        batch_rows: list[Reading] = []
        if watermark is None or event_time > watermark:
            taken.append(row)
            batch_rows.append(row)
            state = rules.setdefault(sensor, SensorRules(sensor))
            state.push(event_id, event_time, [temperature, humidity, status, seq])
        for state in rules.values():
            alerts += state.release(watermark)
        silences += tails.advance(silence_rows(batch_rows), watermark)
        latest = event_time if latest is None else max(latest, event_time)
    for state in rules.values():
        alerts += state.release(None)
    silences += tails.advance(silence_rows([]), None)
    never = {r[1] for r in case.readings} - {r[1] for r in taken}
    return alerts, taken, never, silences


def silence_rows(rows: list[Reading]) -> pd.DataFrame:
    """Readings as `SilenceTails` takes them."""
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    return frame.rename(columns={"sensor_id": "entity_id"})


def batch(rows: list[Reading]) -> list[Alert]:
    frame = pd.DataFrame(rows, columns=list(COLUMNS)).astype({"temperature_c": float})
    return frame_to_alerts(sensor_alerts_batch(frame))


def keyed(alerts: list[Alert]) -> dict[tuple[str, tuple[str, ...]], Alert]:
    out: dict[tuple[str, tuple[str, ...]], Alert] = {}
    for alert in alerts:
        key = (alert.rule, alert.event_ids)
        assert key not in out, f"{key} raised twice"
        out[key] = alert
    return out


def same_evidence(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a.keys() != b.keys():
        return False
    for name, x in a.items():
        y = b[name]
        if isinstance(x, float) or isinstance(y, float):
            if x is None or y is None or not math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-12):
                return False
        elif x != y:
            return False
    return True


@pytest.fixture(scope="module")
def python_forms() -> dict[str, Forms]:
    """Per case: the per-event form's alerts, the batch form's, the ids never taken, and the
    readings taken."""
    out = {}
    for case in CASES:
        alerts, taken, never, silences = per_event(case)
        out[case.name] = (alerts, batch(taken), never, taken, silences)
    return out


@pytest.fixture(scope="module")
def engine_form(spark: SparkSession, python_forms: dict[str, Forms]) -> dict[str, list[Alert]]:
    """Every case in one batch DataFrame (sensors named per case: `own`), one Spark job, over
    the readings the per-event form took in time."""
    rows = [row for case in CASES for row in python_forms[case.name][3]]
    frame = spark.createDataFrame(rows, SCHEMA)
    found = with_alert_ids(batch_alerts(frame, "sensor_id", WINDOW, SLIDE).toPandas())
    out: dict[str, list[Alert]] = {case.name: [] for case in CASES}
    for alert in frame_to_alerts(found):
        out[alert.entity_id.split("/", 1)[0]].append(alert)
    return out


def test_the_corpus_states_its_differences() -> None:
    """Each by-design miss is one of the case's alerts and says why; the span is the
    windows'."""
    from pipeline.rules.windows import span_covered_ms
    from pipeline.settings import duration_ms

    assert span_covered_ms(duration_ms(WINDOW), duration_ms(SLIDE)) == SPAN_MS
    for case in CASES:
        assert set(case.engine_misses) <= set(case.alerts), case.name
        assert bool(case.engine_misses) == bool(case.why), case.name


@pytest.mark.parametrize("name", list(BY_NAME))
def test_the_python_forms_raise_the_corpus_alerts(
    name: str, python_forms: dict[str, Forms]
) -> None:
    case = BY_NAME[name]
    stateful, vectorised, never, _, silences = python_forms[name]
    assert never == set(case.late)
    assert set(keyed(stateful)) == set(case.alerts)
    assert set(keyed(vectorised)) == set(case.alerts)
    assert set(keyed(silences)) == {a for a in case.alerts if a[0] == "silence"}
    for key, alert in keyed(stateful).items():
        for others in (vectorised, silences):
            other = keyed(others).get(key, alert)
            assert (alert.alert_id, alert.event_time) == (other.alert_id, other.event_time)
            assert same_evidence(dict(alert.evidence), dict(other.evidence)), key


@pytest.mark.parametrize("name", list(BY_NAME))
def test_the_engine_form_raises_the_corpus_alerts_but_its_stated_misses(
    name: str,
    python_forms: dict[str, Forms],
    engine_form: dict[str, list[Alert]],
) -> None:
    case = BY_NAME[name]
    engine = keyed(engine_form[name])
    assert set(engine) == set(case.alerts) - set(case.engine_misses)
    stateful = keyed(python_forms[name][0])
    for key, alert in engine.items():
        other = stateful[key]
        assert (alert.alert_id, alert.event_time, alert.label) == (
            other.alert_id,
            other.event_time,
            other.label,
        )
        assert same_evidence(json.loads(json.dumps(dict(alert.evidence))), dict(other.evidence))
