"""The update-mode stats variant (`provisional_stats`): one aggregation per window gives the
same rows as the job's partials merged into windows, once every reading is in (batch)."""

from __future__ import annotations

from typing import Any

import pytest

from core.config import StackConfig, load_model
from pipeline.config import PipelineConfig
from pipeline.jobs.vehicles.job import VEHICLE_SCHEMA
from pipeline.jobs.vehicles.windows import (
    STATS_KEY,
    vehicle_stats,
    vehicle_stats_provisional,
)
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.integration


def test_provisional_stats_equal_the_final_ones_once_complete(
    kafka_stack: StackConfig, spark: Any
) -> None:
    from pyspark.sql import functions as F

    from scenarios.catalog import ScenarioConfig, run_scenario
    from simulators.sinks.memory import MemorySink

    scenario = load_model(ScenarioConfig, REPO_ROOT / "config/scenarios/vehicles.yaml")
    sink = MemorySink()
    run_scenario(scenario, sink, events=4000, speed="max", seed=3, stack=kafka_stack)
    lines = spark.sparkContext.parallelize([v.decode() for v in sink.events.values])
    settings = load_model(PipelineConfig, REPO_ROOT / "config/pipelines/vehicles.yaml").vehicles
    readings = (
        spark.read.schema(VEHICLE_SCHEMA)
        .json(lines)
        .withColumn("event_ts", F.timestamp_millis("event_time"))
        .dropDuplicates(["event_id"])
    )
    args = (settings.stats_windows, settings.stats_signals, settings.percentiles)
    final = vehicle_stats(readings, *args).toPandas()
    provisional = vehicle_stats_provisional(readings, *args).toPandas()
    assert list(provisional.columns) == list(final.columns)
    assert len(final) > 100  # 1-minute and 5-minute sliding windows of many vehicles
    key = list(STATS_KEY)
    merged = final.merge(provisional, on=key, how="outer", suffixes=("_f", "_p"), indicator=True)
    assert set(merged["_merge"]) == {"both"}
    for column in final.columns.difference(key):
        left, right = merged[f"{column}_f"], merged[f"{column}_p"]
        if column == "schema":
            assert (left == right).all()
            continue
        same = (left.isna() & right.isna()) | ((left - right).abs() <= 1e-9 * (1 + left.abs()))
        assert same.all(), column
