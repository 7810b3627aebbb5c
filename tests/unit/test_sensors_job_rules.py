"""The sensor rules of `sensors` (`pipeline.jobs.sensors.rules`) without Spark:
the stateful form, fed a seeded fleet's readings in arrival order and released by a watermark
(state stored and reloaded between batches, as the processor does), gives the batch form's
alerts (silent device included); low battery alerts once per episode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest
import yaml

from detectors import Alert
from pipeline.config import PipelineConfig
from pipeline.jobs.sensors.rules import SensorRules, sensor_alerts_batch
from scenarios.catalog import ScenarioConfig, run_scenario
from simulators.sinks import JsonlSink
from streamsim.evaluate import sensors

FLEET = Path(__file__).parents[2] / "config" / "scenarios" / "sensors.yaml"
WATERMARK_MS = 30_000


@pytest.fixture(scope="module")
def arrivals(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """150 sensors for 10 simulated minutes (seed 7), faults 100 times as often as shipped,
    batteries draining across the low mark, in delivery order (outages, duplicates and all)."""
    data = yaml.safe_load(FLEET.read_text())
    data.update(seed=7, entities=150, duration_s=600)
    data["domain"].update(battery_v={"type": "uniform", "low": 3.4, "high": 3.5})
    data["domain"]["battery_drain_v_per_day"] = 7.2  # half cross 3.4 V
    data["domain"]["faults"]["rate_per_hour"] = 5.0
    out = tmp_path_factory.mktemp("fleet")
    run_scenario(ScenarioConfig.model_validate(data), JsonlSink(out), speed="max")
    return [orjson.loads(line) for line in (out / "events.jsonl").open("rb")]


def streamed(arrivals: list[dict[str, Any]], batch: int = 500) -> list[Alert]:
    """The stateful form per sensor, a micro-batch at a time: the watermark trails the latest
    event time by `WATERMARK_MS`; readings behind it are dropped, as Spark does."""
    stored: dict[str, bytes] = {}
    alerts: list[Alert] = []
    latest = None
    for start in range(0, len(arrivals), batch):
        rows = arrivals[start : start + batch]
        watermark = None if latest is None else latest - WATERMARK_MS
        by_sensor: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            by_sensor.setdefault(row["sensor_id"], []).append(row)
        for sensor, own in by_sensor.items():
            rules = SensorRules(sensor)
            if sensor in stored:
                rules.load_bytes(stored[sensor])
            for r in own:
                if watermark is None or r["event_time"] > watermark:
                    fields = [r["temperature_c"], r["humidity_pct"], r["status"], r["seq"]]
                    rules.push(r["event_id"], r["event_time"], fields)
            alerts += rules.release(watermark)
            stored[sensor] = rules.to_bytes()
        latest = max([latest or 0, *(r["event_time"] for r in rows)])
    for sensor, blob in stored.items():  # end of stream: everything released
        rules = SensorRules(sensor)
        rules.load_bytes(blob)
        alerts += rules.release(None)
    return alerts


def on_time(arrivals: list[dict[str, Any]]) -> pd.DataFrame:
    """The readings the streamed form judged: not behind the watermark on arrival."""
    kept, latest = [], None
    for start in range(0, len(arrivals), 500):
        rows = arrivals[start : start + 500]
        watermark = None if latest is None else latest - WATERMARK_MS
        kept += [r for r in rows if watermark is None or r["event_time"] > watermark]
        latest = max([latest or 0, *(r["event_time"] for r in rows)])
    return pd.DataFrame(kept)


def test_stream_equals_batch_over_the_same_readings(arrivals: list[dict[str, Any]]) -> None:
    got = streamed(arrivals)
    oracle = sensor_alerts_batch(on_time(arrivals))
    labels = {a.label for a in got}
    assert labels == {"stuck_sensor", "spike", "low_battery", "silent_device"}, labels
    assert sorted((a.alert_id, a.label, a.event_ids) for a in got) == sorted(
        (r.alert_id, r.label, tuple(r.event_ids)) for r in oracle.itertuples()
    )


def test_the_fault_rules_are_the_evaluations_rules(arrivals: list[dict[str, Any]]) -> None:
    readings = pd.DataFrame(arrivals).drop_duplicates("event_id")
    evaluated = sensors.run_rules(readings)
    ours = sensor_alerts_batch(readings)
    assert set(evaluated["label"]) == {"stuck_sensor", "spike", "silent_device"}
    assert set(evaluated["alert_id"]) == set(ours.loc[ours["label"] != "low_battery", "alert_id"])


def test_low_battery_alerts_once_per_episode() -> None:
    statuses = ["ok", "low_battery", "low_battery", "ok", "ok", "low_battery", "low_battery"]
    rules = SensorRules("s1")
    for i, status in enumerate(statuses):
        rules.push(f"e{i}", i * 5_000, [20.0 + 0.3 * (i % 2), 40.0 + i, status, i])
    alerts = [a for a in rules.release(None) if a.label == "low_battery"]
    assert [a.event_ids[0] for a in alerts] == ["e1", "e5"]


def test_the_sensors_section_belongs_to_its_job() -> None:
    cfg = PipelineConfig.model_validate(
        {
            "job": "sensors",
            "input_topics": ["sensors.readings"],
            "output_topic": "counts",
            "sensors": {"sensor_alerts": True},
        }
    )
    assert cfg.sensors.sensor_alerts and cfg.sensors.alerts_topic == "alerts"
    with pytest.raises(ValueError, match="sensors configures job sensors"):
        PipelineConfig.model_validate(
            {
                "job": "cards",
                "input_topics": ["x"],
                "output_topic": "y",
                "sensors": {"sensor_alerts": True},
            }
        )
