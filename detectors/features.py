"""Helpers for rules that threshold window aggregates computed elsewhere (Spark SQL, pandas)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from detectors.frames import ENTITY, Columns


def prepare_windows(
    df: pd.DataFrame, required: Sequence[str], optional: Sequence[str], columns: Columns
) -> pd.DataFrame:
    """Rename and check a frame of window aggregates; window bounds become epoch ms.

    `window_start` and `window_end` may be epoch ms or timestamps (Spark's `window` struct
    fields arrive in pandas as datetime64).
    """
    if columns:
        df = df.rename(columns={actual: canonical for canonical, actual in columns.items()})
    wanted = [ENTITY, "window_start", "window_end", *required]
    missing = [name for name in wanted if name not in df.columns]
    if missing:
        raise ValueError(
            f"missing columns {missing}; the frame has {list(df.columns)}. "
            "Map other names with columns={canonical: actual}."
        )
    keep = [*wanted, *(c for c in optional if c in df.columns)]
    out = df.loc[:, keep].copy()
    out[ENTITY] = out[ENTITY].astype(str)
    for name in ("window_start", "window_end", "last_event_time"):
        if name in out.columns:
            out[name] = to_epoch_ms(out[name])
    return out.reset_index(drop=True)


def to_epoch_ms(values: pd.Series) -> pd.Series:
    """Epoch milliseconds from epoch-ms numbers or datetimes (naive datetimes count as UTC)."""
    if pd.api.types.is_datetime64_any_dtype(values):
        stamps = pd.to_datetime(values, utc=True)
        return pd.Series(
            (stamps - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(milliseconds=1),
            index=values.index,
            dtype="int64",
        )
    return values.astype("int64")


def tumbling_start(times_ms: pd.Series, window_ms: int) -> pd.Series:
    """The start of the tumbling window (aligned to the epoch, like Spark's) of each time."""
    return times_ms - times_ms % window_ms


def optional_value(row: dict[str, Any], name: str) -> Any:
    """A row's value, or None when the column is absent or null."""
    value = row.get(name)
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return value


def ids_of(value: Any) -> tuple[str, ...]:
    """Event ids from a list-like cell (None or a missing column: none)."""
    if value is None or isinstance(value, float):
        return ()
    return tuple(sorted(str(v) for v in value))
