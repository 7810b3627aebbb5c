"""`BufferedRules` per entity, kept per bucket of entities: one state call pair per bucket.

In PySpark every state `get` and `update` and every timer call is a round trip to the JVM's
state server, and every grouping key is a pandas frame of its own: grouped per vehicle, a
batch costs each vehicle about 2.5 ms whatever its rules do (issue 31's profile). Grouped by
a bucket (`pmod(xxhash64(entity), buckets)`), a batch costs one `get`, one `update` and at most
one timer move per bucket, and one frame per bucket.

The bucket's state (`state BINARY`, pickled) maps each entity to `(due_ms, blob)`: the blob
is the entity's own `BufferedRules.to_bytes()`, `due_ms` its `next_timer` (its earliest
buffered event, else its expiry); the blob is decoded only when the batch brings the entity
rows or the watermark reaches its due time, so a call decodes the entities it works on, not
the bucket. Release and expiry are the entity's own
(`BufferedRules.release`, `.expired`), so the alerts are those of the per-entity processor:
the same events released in the same order. One event-time timer per bucket sits at the
earliest time any of its entities needs the watermark (a buffered event, else its expiry),
rounded up to the entity processor's `timer_grid_ms`.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from detectors import ALERT_COLUMNS, ALERT_SPARK_DDL, Alert, alerts_to_frame
from pipeline.buffered_rules import STATE_DDL, BufferedRules, RulesFactory

ENTITY = "entity"
BUCKET = "bucket"

#: A bucket's record of one entity: (`BufferedRules.next_timer`, `to_bytes()` blob).
Record = tuple[int | None, bytes]


class BucketedRulesProcessor(StatefulProcessor):
    """An entity processor's rules per bucket of entities (see the module docstring).

    Input rows: `entity` (the entity's key) and the entity processor's `input_columns`.
    """

    state_name = "rules_bucket"

    def __init__(self, entities: RulesFactory) -> None:
        self.entities = entities
        self.ttl_ms = entities.ttl_ms
        self.input_columns = (ENTITY, *entities.input_columns)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState(self.state_name, STATE_DDL)

    def _load(self) -> tuple[dict[str, Record], int | None]:
        stored = self.state.get()
        if stored is None:
            return {}, None
        records, timer = pickle.loads(bytes(stored[0]))  # our own state store
        return records, timer

    def _rules(self, entity: str, records: dict[str, Record]) -> BufferedRules:
        rules = self.entities.new_rules(entity)
        record = records.get(entity)
        if record is not None:
            rules.load_bytes(record[1])
        return rules

    def _push(
        self, rows: Iterator[pd.DataFrame], records: dict[str, Record]
    ) -> dict[str, BufferedRules]:
        """Each input row into its entity's buffer; the entities the rows touched."""
        touched: dict[str, BufferedRules] = {}
        for frame in rows:
            keys = frame[ENTITY].tolist()
            for key, (event_id, event_time, payload) in zip(
                keys, self.entities.payloads(frame), strict=True
            ):
                rules = touched.get(key)
                if rules is None:
                    rules = touched[key] = self._rules(key, records)
                rules.push(event_id, event_time, payload)
        return touched

    def _run(
        self,
        records: dict[str, Record],
        touched: dict[str, BufferedRules],
        timer: int | None,
        watermark: int,
    ) -> Iterator[pd.DataFrame]:
        """Release every entity the watermark reached, forget the expired, store the bucket."""
        for entity, (due, _) in records.items():
            if entity not in touched and due is not None and due <= watermark:
                touched[entity] = self._rules(entity, records)
        alerts: list[Alert] = []
        for entity, rules in touched.items():
            alerts.extend(rules.release(watermark))
            if rules.expired(watermark, self.ttl_ms):
                records.pop(entity, None)
            else:
                records[entity] = (rules.next_timer(self.ttl_ms), rules.to_bytes())
        self._store(records, timer)
        if not alerts:
            return iter([])
        return iter([alerts_to_frame(alerts).loc[:, list(ALERT_COLUMNS)]])

    def _store(self, records: dict[str, Record], timer: int | None) -> None:
        """Move the bucket's one timer to its earliest due entity, then store the records."""
        dues = [due for due, _ in records.values() if due is not None]
        grid = self.entities.timer_grid_ms
        wanted = -(-min(dues) // grid) * grid if dues else None
        if wanted != timer:
            if timer is not None:
                self.handle.deleteTimer(timer)
            if wanted is not None:
                self.handle.registerTimer(wanted)
        if not records:
            self.state.clear()
            return
        blob = pickle.dumps((records, wanted), protocol=pickle.HIGHEST_PROTOCOL)
        self.state.update((blob,))

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        records, timer = self._load()
        touched = self._push(rows, records)
        return self._run(records, touched, timer, timerValues.getCurrentWatermarkInMs())

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        records, timer = self._load()
        if timer == expiredTimerInfo.getExpiryTimeInMs():
            timer = None  # Spark has removed the timer that fired
        return self._run(records, {}, timer, timerValues.getCurrentWatermarkInMs())

    def close(self) -> None:
        pass


def bucketed_alerts(
    rows: DataFrame, entity: Column, entities: RulesFactory, buckets: int
) -> DataFrame:
    """Alert rows (`ALERT_SPARK_DDL`) of `entities`' rules over watermarked `rows` (with
    `event_ts`), kept in `buckets` buckets of `entity`'s values."""
    processor = BucketedRulesProcessor(entities)
    keyed = rows.select(
        F.pmod(F.xxhash64(entity), F.lit(buckets)).alias(BUCKET),
        entity.cast("string").alias(ENTITY),
        *entities.input_columns,
        "event_ts",
    )
    return keyed.groupBy(BUCKET).transformWithStateInPandas(
        processor, ALERT_SPARK_DDL, "Append", "EventTime"
    )
