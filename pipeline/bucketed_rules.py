"""`BufferedRules` per entity, kept per bucket of entities in `applyInPandasWithState`.

Grouped per entity, a batch costs each entity a pandas frame of its own whatever its rules do
(about 2.5 ms a vehicle, issue 31's profile). Grouped by a bucket
(`pmod(xxhash64(entity), buckets)`), it costs one frame and one state per bucket, and the
state travels with the bucket's rows in the Arrow batches: no round trip to a state server.
`applyInPandasWithState` also starts no Python worker on the driver to plan the query, as a
transformWithState operator does; that worker must connect back within 10 s (hard-coded in
Spark 4.2), and on a busy machine it did not and the query failed.

The bucket's state (`state BINARY`, pickled) maps each entity to `(due_ms, blob)`: the blob
is the entity's own `BufferedRules.to_bytes()`, `due_ms` its `next_timer` (its earliest
buffered event, else its expiry); the blob is decoded only when the batch brings the entity
rows or the watermark reaches its due time, so a call decodes the entities it works on, not
the bucket. Release and expiry are the entity's own (`BufferedRules.release`, `.expired`):
the same events released in the same order as per entity. The bucket's event-time timeout
is the earliest time any of its entities needs the watermark, rounded up to the factory's
`timer_grid_ms`, so a bucket gone quiet still releases its last events and forgets.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupState

from detectors import ALERT_SPARK_DDL, Alert
from pipeline.buffered_rules import BufferedRules, RulesFactory
from pipeline.group_state import STATE_DDL, GroupStateFn, alert_frames

ENTITY = "entity"
BUCKET = "bucket"

#: A bucket's record of one entity: (`BufferedRules.next_timer`, `to_bytes()` blob).
Record = tuple[int | None, bytes]


class RulesBucket:
    """One bucket's entities: their records, and the rules of those a call works on.

    Input rows: `entity` (the entity's key) and the factory's `input_columns`.
    """

    def __init__(self, entities: RulesFactory, stored: bytes | None = None) -> None:
        self.entities = entities
        self.records: dict[str, Record] = {} if stored is None else pickle.loads(stored)
        self.touched: dict[str, BufferedRules] = {}

    def _rules(self, entity: str) -> BufferedRules:
        rules = self.touched.get(entity)
        if rules is None:
            rules = self.touched[entity] = self.entities.new_rules(entity)
            record = self.records.get(entity)
            if record is not None:
                rules.load_bytes(record[1])
        return rules

    def push_frame(self, frame: pd.DataFrame) -> None:
        """Each input row into its entity's buffer."""
        keys = frame[ENTITY].tolist()
        for key, (event_id, event_time, payload) in zip(
            keys, self.entities.payloads(frame), strict=True
        ):
            self._rules(key).push(event_id, event_time, payload)

    def advance(self, watermark_ms: int) -> list[Alert]:
        """Release every entity the rows touched or the watermark reached, forget the
        expired; the alerts."""
        for entity, (due, _) in self.records.items():
            if due is not None and due <= watermark_ms:
                self._rules(entity)
        alerts: list[Alert] = []
        ttl_ms = self.entities.ttl_ms
        for entity, rules in self.touched.items():
            alerts.extend(rules.release(watermark_ms))
            if rules.expired(watermark_ms, ttl_ms):
                self.records.pop(entity, None)
            else:
                self.records[entity] = (rules.next_timer(ttl_ms), rules.to_bytes())
        self.touched = {}
        return alerts

    def due_ms(self) -> int | None:
        """When the bucket next needs the watermark: its earliest due entity, on the grid."""
        dues = [due for due, _ in self.records.values() if due is not None]
        grid = self.entities.timer_grid_ms
        return -(-min(dues) // grid) * grid if dues else None

    def to_bytes(self) -> bytes | None:
        """The records as stored; None when the bucket holds no entity."""
        if not self.records:
            return None
        return pickle.dumps(self.records, protocol=pickle.HIGHEST_PROTOCOL)


def bucket_rules(entities: RulesFactory) -> GroupStateFn:
    """The `applyInPandasWithState` function (timeout conf EventTimeTimeout): restore the
    bucket, push its rows, advance it to the watermark, store it, emit its alerts."""

    def apply(
        key: Any, frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        stored = state.getOption
        bucket = RulesBucket(entities, None if stored is None else bytes(stored[0]))
        for frame in frames:
            bucket.push_frame(frame)
        alerts = bucket.advance(state.getCurrentWatermarkMs())
        blob, due = bucket.to_bytes(), bucket.due_ms()
        if blob is None:
            state.remove()
        else:
            state.update((blob,))
        if due is not None:
            state.setTimeoutTimestamp(due)
        return alert_frames(alerts)

    return apply


def bucketed_alerts(
    rows: DataFrame, entity: Column, entities: RulesFactory, buckets: int
) -> DataFrame:
    """Alert rows (`ALERT_SPARK_DDL`) of `entities`' rules over watermarked `rows` (with
    `event_ts`), kept in `buckets` buckets of `entity`'s values."""
    keyed = rows.select(
        F.pmod(F.xxhash64(entity), F.lit(buckets)).alias(BUCKET),
        entity.cast("string").alias(ENTITY),
        *entities.input_columns,
        "event_ts",
    )
    return keyed.groupBy(BUCKET).applyInPandasWithState(
        bucket_rules(entities), ALERT_SPARK_DDL, STATE_DDL, "append", "EventTimeTimeout"
    )
