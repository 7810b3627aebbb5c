"""What the vehicle series rules share: input preparation and the stateful base class.

Vectorised forms take one or many vehicles' readings (`entity_id`, `event_id`, `event_time`
and the signal column). They sort by event time, drop duplicate event ids, then drop readings
whose signal is missing (NaN), and run per vehicle.

Stateful forms (`SeriesState` subclasses) see one vehicle's readings one at a time, in event-time
order. Feed them either
- `update(...)` per reading: a repeated event id is ignored, and a reading older than one
  already processed is ignored and counted in `late`; or
- `update_frame(rows, watermark_ms)` per micro-batch (Spark `transformWithStateInPandas`):
  rows go through an `EventTimeBuffer` in the state and are processed once the watermark passes
  them, so disorder within the watermark delay is repaired, not dropped. `watermark_ms=None`
  processes everything buffered now (batch use, tests, end of stream). Readings wait in the
  buffer until a later watermark: register an event-time timer at `pending_ms()` and call
  `flush(watermark_ms)` when it expires, so a vehicle that goes quiet still gets judged.
Either way, a stateful form fed the same readings gives the same alerts as the vectorised one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pandas as pd

from detectors.alert import Alert, alerts_to_frame
from detectors.dedup import SeenIds
from detectors.frames import EVENT_ID, EVENT_TIME, Columns, prepare
from detectors.reorder import EventTimeBuffer
from detectors.snapshot import Snapshottable


def series_rows(
    df: pd.DataFrame,
    signal: str,
    optional: Sequence[str] = (),
    columns: Columns = None,
    required: Sequence[str] = (),
) -> pd.DataFrame:
    """Prepared readings with a numeric, non-missing `signal` (see `detectors.frames`);
    `required` and `optional` columns are made numeric too (NaN where missing)."""
    rows = prepare(df, [signal, *required], optional, columns)
    rows[signal] = pd.to_numeric(rows[signal], errors="coerce").astype(float)
    for name in (*required, *optional):
        if name in rows.columns:
            rows[name] = pd.to_numeric(rows[name], errors="coerce").astype(float)
    return rows.loc[rows[signal].notna()].reset_index(drop=True)


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


class SeriesState(Snapshottable):
    """Base of the stateful series rules: dedup, lateness, buffering and snapshots."""

    rule: ClassVar[str] = ""

    def __init__(self, entity_id: str, signal: str, label: str | None, max_seen: int) -> None:
        self.entity_id, self.signal, self.label = entity_id, signal, label
        self.seen = SeenIds(max_seen)
        self.last_time: int | None = None
        self.late_ignored = 0
        self.buffer = EventTimeBuffer()

    @property
    def late(self) -> int:
        """Readings ignored as too late (older than one already processed)."""
        return self.late_ignored + self.buffer.late_dropped

    def pending_ms(self) -> int | None:
        """The latest buffered event time, or None when nothing waits for the watermark."""
        return self.buffer.latest_ms

    def fields(self) -> tuple[str, ...]:
        """The frame columns a reading uses, the signal first."""
        return (self.signal,)

    def optional_fields(self) -> tuple[str, ...]:
        """Those of `fields()` a frame may lack (read as missing values)."""
        return ()

    def step(self, event_id: str, event_time: int, values: Sequence[float]) -> Alert | None:
        raise NotImplementedError

    def push(self, event_id: str, event_time: int, values: Sequence[Any]) -> list[Alert]:
        """One reading with `values` in `fields()` order."""
        return self.push_numbers(str(event_id), int(event_time), [_number(v) for v in values])

    def push_numbers(self, event_id: str, event_time: int, numbers: Sequence[float]) -> list[Alert]:
        """`push` for a caller whose values are floats already (NaN where missing), its id a
        str and its time an int: the per-reading work of a processor feeding many states."""
        if numbers[0] != numbers[0] or event_id in self.seen:  # NaN: no reading
            return []
        self.seen.add(event_id)
        if self.last_time is not None and event_time < self.last_time:
            self.late_ignored += 1
            return []
        self.last_time = event_time
        alert = self.step(event_id, event_time, numbers)
        return [] if alert is None else [alert]

    def update_frame(
        self, rows: pd.DataFrame, watermark_ms: int | None = None, columns: Columns = None
    ) -> pd.DataFrame:
        """Buffer a micro-batch; process what the watermark released; alerts as a frame."""
        if columns:
            rows = rows.rename(columns={actual: canonical for canonical, actual in columns.items()})
        wanted = [EVENT_ID, EVENT_TIME, *self.fields()]
        absent = [name for name in wanted if name not in rows.columns]
        missing = [name for name in absent if name not in self.optional_fields()]
        if missing:
            raise ValueError(f"missing columns {missing}; the frame has {list(rows.columns)}")
        rows = rows.assign(**dict.fromkeys(absent, None)) if absent else rows
        for event_id, event_time, *values in rows[wanted].itertuples(index=False):
            payload = [None if v is None or v != v else float(v) for v in values]
            self.buffer.push(int(event_time), str(event_id), payload)
        return self.flush(watermark_ms)

    def flush(self, watermark_ms: int | None = None) -> pd.DataFrame:
        """Process buffered readings up to `watermark_ms` (all for None)."""
        alerts: list[Alert] = []
        for event_time, event_id, values in self.buffer.release(watermark_ms):
            alerts.extend(self.push(event_id, event_time, values))
        return alerts_to_frame(alerts)

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able snapshot (store it in Spark state, restore with `restore`)."""
        return {
            "seen": self.seen.to_list(),
            "last_time": self.last_time,
            "late_ignored": self.late_ignored,
            "buffer": self.buffer.snapshot(),
            "rule": self._snapshot(),
        }

    def restore(self, data: Mapping[str, Any]) -> None:
        self.seen = SeenIds(self.seen.capacity, data["seen"])
        self.last_time = None if data["last_time"] is None else int(data["last_time"])
        self.late_ignored = int(data["late_ignored"])
        self.buffer.restore(data["buffer"])
        self._restore(data["rule"])

    def _snapshot(self) -> dict[str, Any]:
        return {}

    def _restore(self, data: Mapping[str, Any]) -> None:
        return None
