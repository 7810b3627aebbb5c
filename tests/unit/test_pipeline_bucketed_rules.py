"""`bucket_rules` without Spark, behind PySpark's own `GroupState`: a bucket of vehicles gives
the alerts of the vectorised forms whatever the arrival order, keeps one timeout ahead of the
watermark, and forgets quiet vehicles."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import BinaryType, StructField, StructType

from detectors import frame_to_alerts
from pipeline.bucketed_rules import ENTITY, bucket_rules
from pipeline.jobs.vehicles.config import VehiclesSettings
from pipeline.jobs.vehicles.rules import VehicleRulesFactory, vehicle_alerts_batch
from tests.unit.test_pipeline_vehicle_rules import readings

HOUR_MS = 3_600_000
STATE_SCHEMA = StructType([StructField("state", BinaryType())])


#: A bucket's timeout while none is set (`GroupState.NO_TIMESTAMP`).
NONE = GroupState.NO_TIMESTAMP


@dataclass
class Bucket:
    """One bucket's calls as Spark makes them: a fresh `GroupState` per call, holding what
    the previous call stored, and its timeout."""

    entities: VehicleRulesFactory
    stored: tuple[Any, ...] | None = None
    timeout: int = NONE

    def call(self, frames: list[pd.DataFrame], watermark: int, timed_out: bool = False) -> Any:
        state = GroupState(
            self.stored, 0, watermark, GroupStateTimeout.EventTimeTimeout, timed_out, True,
            self.stored is not None, False, False, NONE, b"", STATE_SCHEMA,
        )  # fmt: skip
        rows = [frame.rename(columns={"vehicle_id": ENTITY}) for frame in frames]
        out = alert_ids(bucket_rules(self.entities)(("0",), iter(rows), state))
        self.stored = state.getOption
        self.timeout = json.loads(state.json())["timeoutTimestamp"]
        return out

    def fire(self, watermark: int | None = None) -> Any:
        """The timeout fires: the watermark has passed it (default: by 1 ms)."""
        assert self.timeout != NONE
        return self.call([], self.timeout + 1 if watermark is None else watermark, True)


def fleet() -> pd.DataFrame:
    """Three vehicles with the same faults, 7 s apart, as the operator's input rows."""
    one = readings()
    frames = []
    for n in range(3):
        frame = one.copy()
        frame["vehicle_id"] = f"veh-{n}"
        frame["event_id"] = frame["event_id"] + f"-{n}"
        frame["event_time"] += 7_000 * n
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def bucket(ttl_ms: int | None = None) -> Bucket:
    return Bucket(VehicleRulesFactory(VehiclesSettings().enabled_detectors(), ttl_ms))


def alert_ids(frames: Any) -> list[str]:
    return [str(i) for f in frames for i in f["alert_id"]]


def test_a_bucket_gives_the_vectorised_forms_alerts_whatever_the_arrival_order() -> None:
    frame = fleet()
    expected = frame_to_alerts(vehicle_alerts_batch(frame, VehiclesSettings().enabled_detectors()))
    state = bucket()
    shuffled = frame.sample(frac=1.0, random_state=5)
    with_duplicates = pd.concat([shuffled, shuffled.iloc[:50]])
    got: list[str] = []
    for start in range(0, len(with_duplicates), 150):  # batches, each as two Arrow frames
        chunk = with_duplicates.iloc[start : start + 150]
        watermark = int(chunk["event_time"].min()) - 1
        got += state.call([chunk.iloc[:70], chunk.iloc[70:]], watermark)
        assert state.timeout > watermark
    got += state.fire(int(frame["event_time"].max()) + 60_000)
    assert sorted(got) == sorted(a.alert_id for a in expected)
    assert len(expected) > 10


def test_quiet_vehicles_are_forgotten_after_the_ttl() -> None:
    frame = fleet()
    state = bucket(ttl_ms=HOUR_MS)
    end = int(frame["event_time"].max())
    state.call([frame], end)
    assert state.stored is not None
    assert state.timeout >= end + HOUR_MS - 7_000 * 2
    state.fire()
    assert state.stored is not None  # the later vehicles are still due
    for _ in range(3):
        if state.timeout != NONE:
            state.fire()
    assert state.stored is None and state.timeout == NONE
