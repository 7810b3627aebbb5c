"""Helpers for rules that threshold window aggregates computed elsewhere (Spark SQL, pandas)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from detectors.frames import ENTITY, EVENT_TIME, Columns


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


def window_rows(rows: pd.DataFrame, window_ms: int, slide_ms: int | None = None) -> pd.DataFrame:
    """Each row once per window that holds it, as Spark's `window()` assigns them (starts
    aligned to the epoch, start <= event_time < end), with `window_start`, `window_end` and
    `prior`: whether the row lies before its window's last slide (`first_crossing`).

    >>> rows = pd.DataFrame({"event_time": [30_000, 90_000]})
    >>> window_rows(rows, 120_000, 60_000)[["window_start", "prior"]].values.tolist()
    [[0, True], [60000, True], [-60000, False], [0, False]]
    """
    slide = window_ms if slide_ms is None else slide_ms
    times = rows[EVENT_TIME]
    per_offset = []
    for k in range(-(-window_ms // slide)):
        start = tumbling_start(times, slide) - k * slide
        holds = start + window_ms > times
        per_offset.append(rows[holds].assign(window_start=start[holds]))
    out = pd.concat(per_offset, ignore_index=True)
    out["window_end"] = out["window_start"] + window_ms
    out["prior"] = out[EVENT_TIME] < out["window_end"] - slide
    return out


def with_prior(windows: pd.DataFrame, prior: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """`windows` joined with their `prior` counts (indexed by `keys`; absent: 0)."""
    out = windows.join(prior, on=keys)
    out[prior.columns] = out[prior.columns].fillna(0).astype("int64")
    return out


def window_key(window_start: int, window_end: int, event_ids: Sequence[str]) -> tuple[Any, ...]:
    """The alert key of a window: its bounds and its first event id (sorted). An update-mode
    re-emission of the window keeps it; the same entity and window in another run (other
    events) does not share it, so a sink that skips known ids never skips that alert.

    >>> window_key(0, 600_000, ["e2", "e1"])
    ('window', 0, 600000, 'e1')
    """
    first = (min(event_ids),) if event_ids else ()
    return ("window", int(window_start), int(window_end), *first)


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


def first_crossing(fires: np.ndarray, prior_fires: np.ndarray) -> np.ndarray:
    """Sliding windows that fire where the same window without its last slide does not.

    Window rules are monotone (more events never un-fire them), so as a window slides over a
    burst, this keeps the window whose newest slide brought it over the threshold and drops
    the overlapping ones after it that hold the burst too: one alert per burst, where a
    tumbling window might have split it below the threshold.

    >>> first_crossing(np.array([False, True, True]), np.array([False, False, True])).tolist()
    [False, True, False]
    """
    return np.asarray(fires, dtype=bool) & ~np.asarray(prior_fires, dtype=bool)


#: (window_start, window_end, lo, hi, prior_hi): a window's events are `events[lo:hi]`, those
#: before its last slide `events[lo:prior_hi]`.
ClosingWindow = tuple[int, int, int, int, int]


def closing_windows(
    times: Sequence[int], after_ms: int | None, until_ms: int, window_ms: int, slide_ms: int
) -> list[ClosingWindow]:
    """The windows of `window_ms` sliding by `slide_ms` (starts aligned to the epoch, as
    Spark's `window()`: start <= t < end) that hold at least one of the sorted `times` and
    end in `(after_ms, until_ms]`: the windows a watermark moving from `after_ms` (None: from
    the start) to `until_ms` closes. With `slide_ms >= window_ms` (tumbling) the prior slice is
    empty.

    >>> closing_windows([30_000, 90_000], None, 240_000, 120_000, 60_000)
    [(-60000, 60000, 0, 1, 0), (0, 120000, 0, 2, 1), (60000, 180000, 1, 2, 2)]
    >>> closing_windows([30_000, 90_000], 120_000, 240_000, 120_000, 60_000)
    [(60000, 180000, 1, 2, 2)]
    """
    if not times:
        return []
    slide = min(slide_ms, window_ms)
    first = -((window_ms - times[0] - 1) // slide) * slide  # least start with end > times[0]
    if after_ms is not None:
        first = max(first, -((window_ms - after_ms - 1) // slide) * slide)
    last = min(until_ms - window_ms, times[-1]) // slide * slide
    out: list[ClosingWindow] = []
    for start in range(first, last + 1, slide):
        end = start + window_ms
        lo = bisect.bisect_left(times, start)
        hi = bisect.bisect_left(times, end)
        if hi > lo:
            prior = bisect.bisect_left(times, end - slide, lo, hi) if slide < window_ms else lo
            out.append((start, end, lo, hi, prior))
    return out


def next_window_end(latest_ms: int, until_ms: int, window_ms: int, slide_ms: int) -> int | None:
    """The end of the first window after `until_ms` that holds an event at `latest_ms` (None:
    no window ending after `until_ms` holds it): when the watermark must next look.

    >>> next_window_end(90_000, 120_000, 120_000, 60_000)
    180000
    >>> next_window_end(0, 120_000, 60_000, 60_000) is None
    True
    """
    slide = min(slide_ms, window_ms)
    start = -((window_ms - until_ms - 1) // slide) * slide  # least start with end > until
    return start + window_ms if start <= latest_ms else None
