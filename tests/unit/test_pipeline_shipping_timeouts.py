"""The shipping job's per-log function (`log_rules`) without Spark, behind PySpark's own
`GroupState` (ProcessingTimeTimeout): backfill sets the log's timeout `settle` ahead, a
timed-out call scores the log, and so does a call with rows once the timeout is due (Spark
calls a key as timed out only in a batch that brings it nothing)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import BinaryType, StructField, StructType

from pipeline.jobs.shipping.job import log_rules
from pipeline.jobs.shipping.logs import BACKFILL_CHANNEL, KINDS, EntityLog

SETTLE_MS = 3_000
NONE = GroupState.NO_TIMESTAMP
STATE_SCHEMA = StructType([StructField("state", BinaryType())])
SHIP = "s:9321483"


@dataclass
class Log:
    """One log's calls as Spark makes them: a fresh `GroupState` per call at processing time
    `now`, holding what the previous call stored."""

    stored: tuple[Any, ...] | None = None
    timeout: int = NONE

    def call(self, now: int, rows: pd.DataFrame | None = None) -> EntityLog:
        state = GroupState(
            self.stored, now, NONE, GroupStateTimeout.ProcessingTimeTimeout, rows is None,
            False, self.stored is not None, False, False, NONE, b"", STATE_SCHEMA,
        )  # fmt: skip
        frames = [] if rows is None else [rows]
        list(log_rules(1_800_000, 30 * 86_400_000, SETTLE_MS)((SHIP,), iter(frames), state))
        self.stored = state.getOption
        self.timeout = json.loads(state.json())["timeoutTimestamp"]
        assert self.stored is not None
        return EntityLog.from_bytes(SHIP, bytes(self.stored[0]))


def positions(first_ms: int, channel: str) -> pd.DataFrame:
    """Three positions of a ship at anchor, a minute apart, as the job routes them."""
    times = [first_ms + 60_000 * n for n in range(3)]
    values = {
        "event_id": [f"{channel}-{t}" for t in times],
        "ship_id": ["9321483"] * 3,
        "event_time": times,
        "voyage_id": ["V1"] * 3,
        "lat": [51.9] * 3,
        "lon": [4.1] * 3,
        "sog_kn": [0.0] * 3,
        "nav_status": ["at_anchor"] * 3,
        "channel": [channel] * 3,
    }
    frame = pd.DataFrame({c: values[c] for c in KINDS["position"]})
    frame["kind"] = "position"
    frame["key"] = SHIP
    return frame


def test_backfill_waits_settle_and_a_timed_out_call_scores_it() -> None:
    log = Log()
    landed = log.call(10_000, positions(0, BACKFILL_CHANNEL))
    assert landed.dirty and log.timeout == 10_000 + SETTLE_MS
    assert log.call(10_000 + SETTLE_MS + 1).dirty is False
    assert log.timeout == NONE


def test_a_log_with_rows_every_batch_is_scored_once_its_timeout_is_due() -> None:
    log = Log()
    log.call(10_000, positions(0, BACKFILL_CHANNEL))
    live = log.call(11_000, positions(600_000, "satellite"))
    assert live.dirty and log.timeout == 10_000 + SETTLE_MS  # live rows do not put it off
    scored = log.call(10_000 + SETTLE_MS + 500, positions(1_200_000, "satellite"))
    assert scored.dirty is False and log.timeout == NONE
