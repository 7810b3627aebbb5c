"""What the jobs' `applyInPandasWithState` functions share: their state column, their type,
and alerts as their output frames."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pandas as pd
from pyspark.sql.streaming.state import GroupState

from detectors import ALERT_COLUMNS, Alert, alerts_to_frame

#: One pickled blob per group: each job's own state, written and read by its own code.
STATE_DDL = "state BINARY"

#: (grouping key, the group's frames in this batch, its state) -> output frames.
GroupStateFn = Callable[[Any, Iterator[pd.DataFrame], GroupState], Iterator[pd.DataFrame]]


def alert_frames(alerts: Iterable[Alert]) -> Iterator[pd.DataFrame]:
    """The alerts as one `ALERT_COLUMNS` frame; no frame at all when there are none (most
    groups of most batches).

    >>> list(alert_frames([]))
    []
    """
    found = list(alerts)
    if not found:
        return iter([])
    return iter([alerts_to_frame(found).loc[:, list(ALERT_COLUMNS)]])
