"""The engine form's silence rule: `detectors.series.silence_tails.SilenceTails` per bucket of
sensors in `applyInPandasWithState`, the one Python stateful operator of `rules_form: engine`.

Why Python state: a silence is judged against the device's own interval, the median of its
last `history` gaps, and an outage lasts longer than any window the engine can hold with that
history. As sliding-window expressions (4 minutes by 1), the rule caught 0.27-0.46 of the
report split's silent devices against 0.89-1.00 for the per-event form (issue 31):
no built-in carries a device's last readings across windows of any length. So the state is
each sensor's last `history + 1` readings, kept per bucket (`hash(sensor) mod buckets`), and a
batch costs one numpy pass per bucket, not a state round trip and a pandas frame per sensor.

The state (pickled frames) travels with the bucket's rows in the Arrow batches; the bucket's
event-time timeout is its earliest held reading, so a bucket that goes quiet still releases.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupState

from detectors import ALERT_COLUMNS, ALERT_SPARK_DDL, SilenceParams, alerts_to_frame
from detectors.series.silence_tails import SilenceTails
from pipeline.group_state import STATE_DDL, GroupStateFn, alert_frames

#: Buckets of the batch form (`batch_silence_alerts`): tasks of one pandas pass each.
BATCH_BUCKETS = 8


def bucket_silences(params: SilenceParams, ttl_ms: int | None) -> GroupStateFn:
    """The `applyInPandasWithState` function (timeout conf EventTimeTimeout): restore the
    bucket's `SilenceTails`, advance it to the watermark, store it, emit its alerts."""

    def apply(
        key: Any, frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        tails = SilenceTails(params, ttl_ms=ttl_ms)
        stored = state.getOption
        if stored is not None:
            tails.restore(bytes(stored[0]))
        new = [frame for frame in frames if len(frame)]
        readings = pd.concat(new, ignore_index=True) if new else tails.held.iloc[:0]
        alerts = tails.advance(readings, state.getCurrentWatermarkMs())
        state.update((tails.to_bytes(),))
        if tails.due_ms is not None:
            state.setTimeoutTimestamp(tails.due_ms)
        return alert_frames(alerts)

    return apply


def bucketed(events: DataFrame, entity: str, buckets: int) -> DataFrame:
    """The columns `SilenceTails` reads, and each reading's `bucket` of its sensor."""
    return events.select(
        F.pmod(F.xxhash64(entity), F.lit(buckets)).alias("bucket"),
        F.col(entity).cast("string").alias("entity_id"),
        "event_id",
        "event_time",
        F.col("seq").cast("double").alias("seq"),
        *(["event_ts"] if "event_ts" in events.columns else []),
    )


def silence_alerts(
    events: DataFrame, entity: str, params: SilenceParams, buckets: int, ttl_ms: int | None
) -> DataFrame:
    """Alert rows (`ALERT_SPARK_DDL`) of the silences in `events` (streaming, watermarked on
    `event_ts`, with `event_id`, `event_time` and `seq`), each event id once within the
    watermark."""
    rows = bucketed(events.dropDuplicatesWithinWatermark(["event_id"]), entity, buckets)
    return rows.groupBy("bucket").applyInPandasWithState(
        bucket_silences(params, ttl_ms), ALERT_SPARK_DDL, STATE_DDL, "append", "EventTimeTimeout"
    )


def batch_silence_alerts(events: DataFrame, entity: str, params: SilenceParams) -> DataFrame:
    """`silence_alerts` over a batch DataFrame: each bucket's readings released at once."""

    def apply(frame: pd.DataFrame) -> pd.DataFrame:
        alerts = SilenceTails(params).advance(frame, None)
        return alerts_to_frame(alerts).loc[:, list(ALERT_COLUMNS)]

    rows = bucketed(events, entity, BATCH_BUCKETS)
    return rows.groupBy("bucket").applyInPandas(apply, ALERT_SPARK_DDL)
