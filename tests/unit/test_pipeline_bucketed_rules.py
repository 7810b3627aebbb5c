"""`BucketedRulesProcessor` without Spark: a bucket of vehicles behind a stand-in state handle
gives the alerts of the vectorised forms, moves its one timer, and forgets quiet vehicles."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from detectors import frame_to_alerts
from pipeline.bucketed_rules import ENTITY, BucketedRulesProcessor
from pipeline.jobs.vehicles.config import VehiclesSettings
from pipeline.jobs.vehicles.rules import VehicleRulesFactory, vehicle_alerts_batch
from tests.unit.test_pipeline_vehicle_rules import readings

HOUR_MS = 3_600_000


@dataclass
class ValueState:
    value: tuple[Any, ...] | None = None

    def get(self) -> tuple[Any, ...] | None:
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = value

    def clear(self) -> None:
        self.value = None


@dataclass
class Handle:
    state: ValueState = field(default_factory=ValueState)
    timers: set[int] = field(default_factory=set)

    def getValueState(self, name: str, ddl: str) -> ValueState:
        return self.state

    def registerTimer(self, ms: int) -> None:
        self.timers.add(ms)

    def deleteTimer(self, ms: int) -> None:
        self.timers.remove(ms)


@dataclass
class At:
    watermark: int
    expiry: int = 0

    def getCurrentWatermarkInMs(self) -> int:
        return self.watermark

    def getExpiryTimeInMs(self) -> int:
        return self.expiry


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


def bucket(ttl_ms: int | None = None) -> tuple[BucketedRulesProcessor, Handle]:
    entities = VehicleRulesFactory(VehiclesSettings().enabled_detectors(), ttl_ms)
    processor, handle = BucketedRulesProcessor(entities), Handle()
    processor.init(handle)  # type: ignore[arg-type]
    return processor, handle


def rows_of(processor: BucketedRulesProcessor, frame: pd.DataFrame) -> pd.DataFrame:
    return frame.rename(columns={"vehicle_id": ENTITY}).loc[:, list(processor.input_columns)]


def fire(processor: BucketedRulesProcessor, handle: Handle, watermark: int | None = None) -> Any:
    """The bucket's timer fires (Spark removes it first) at `watermark` (default: its time)."""
    (timer,) = handle.timers
    handle.timers.remove(timer)
    at = At(timer if watermark is None else watermark)
    return processor.handleExpiredTimer(("0",), at, At(0, timer))  # type: ignore[arg-type]


def alert_ids(frames: Any) -> list[str]:
    return [str(i) for f in frames for i in f["alert_id"]]


def test_a_bucket_gives_the_vectorised_forms_alerts_whatever_the_arrival_order() -> None:
    frame = fleet()
    expected = frame_to_alerts(vehicle_alerts_batch(frame, VehiclesSettings().enabled_detectors()))
    processor, handle = bucket()
    shuffled = frame.sample(frac=1.0, random_state=5)
    with_duplicates = pd.concat([shuffled, shuffled.iloc[:50]])
    got: list[str] = []
    for start in range(0, len(with_duplicates), 150):  # batches, each as two Arrow frames
        chunk = rows_of(processor, with_duplicates.iloc[start : start + 150])
        watermark = int(chunk["event_time"].min()) - 1
        frames = iter([chunk.iloc[:70], chunk.iloc[70:]])
        got += alert_ids(processor.handleInputRows(("0",), frames, At(watermark)))  # type: ignore[arg-type]
        assert len(handle.timers) == 1
    end = int(frame["event_time"].max()) + 60_000
    got += alert_ids(fire(processor, handle, end))
    assert sorted(got) == sorted(a.alert_id for a in expected)
    assert len(expected) > 10


def test_quiet_vehicles_are_forgotten_after_the_ttl() -> None:
    frame = fleet()
    processor, handle = bucket(ttl_ms=HOUR_MS)
    end = int(frame["event_time"].max())
    processor.handleInputRows(("0",), iter([rows_of(processor, frame)]), At(end))  # type: ignore[arg-type]
    assert handle.state.value is not None
    (timer,) = handle.timers
    assert timer >= end + HOUR_MS - 7_000 * 2
    fire(processor, handle)
    assert handle.state.value is not None  # the later vehicles are still due
    for _ in range(3):
        if handle.timers:
            fire(processor, handle)
    assert handle.state.value is None and handle.timers == set()
