"""`silence` for a bucket of devices at once: the stateful form, vectorised over the bucket.

`SilenceTails` keeps, per device, its last `history + 1` released readings (the gaps its
interval is learned from, and the reading its next gap starts at), and the readings not yet
released. `advance(readings, watermark_ms)` takes a batch's new readings, of any devices in
any order, releases every held reading at or before the watermark in (event_time, event_id)
order, and judges the released gaps with numpy over the whole bucket: one pass per batch,
not one per device or reading. The alerts, ids and evidence are `SilenceState`'s fed each
device's readings in event-time order (the conformance corpus checks it).

As in `EventTimeBuffer`, a reading older than its device's latest released one is late:
refused and counted in `late_dropped`. A reading is taken once per device and event id (a
repeat of one still in the tail is dropped too). A device is forgotten once the watermark is
`ttl_ms` past its latest released reading; the held readings are bounded by the watermark's
delay.
"""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd

from detectors.alert import Alert
from detectors.frames import ENTITY, EVENT_ID, EVENT_TIME
from detectors.series.silence import (
    LABEL,
    RULE,
    SEQ,
    SilenceParams,
    learned_intervals,
    silence_evidence,
    silence_fires,
)

COLUMNS = (ENTITY, EVENT_ID, EVENT_TIME, SEQ)
_NEW = "_new"


def _frame(readings: pd.DataFrame) -> pd.DataFrame:
    """The canonical columns, typed: ids as text, time as int64, `seq` as float (NaN where
    missing: a gap next to it never fires)."""
    return pd.DataFrame(
        {
            ENTITY: readings[ENTITY].astype(str).to_numpy(object),
            EVENT_ID: readings[EVENT_ID].astype(str).to_numpy(object),
            EVENT_TIME: readings[EVENT_TIME].to_numpy(np.int64),
            SEQ: pd.to_numeric(readings[SEQ], errors="coerce").to_numpy(float),
        }
    )


def _keys(rows: pd.DataFrame) -> pd.Series:
    """Each reading as one text: its device and event id (a delivery seen before repeats it)."""
    return rows[ENTITY] + "\x1f" + rows[EVENT_ID]


class SilenceTails:
    """The silences of many devices (see the module docstring).

    >>> tails = SilenceTails()
    >>> rows = pd.DataFrame({"entity_id": ["s1"] * 6, "event_id": [f"e{i}" for i in range(6)],
    ...     "event_time": [0, 5_000, 10_000, 15_000, 60_000, 65_000], "seq": range(6)})
    >>> tails.advance(rows.iloc[:5], watermark_ms=20_000)  # e4 held: past the watermark
    []
    >>> [a.event_ids for a in tails.advance(rows.iloc[5:], watermark_ms=None)]
    [('e3', 'e4')]
    """

    def __init__(
        self, params: SilenceParams | None = None, *, label: str | None = LABEL,
        ttl_ms: int | None = None,
    ) -> None:  # fmt: skip
        self.params = params or SilenceParams()
        self.label = label
        self.ttl_ms = ttl_ms
        self.tails = _frame(pd.DataFrame(columns=list(COLUMNS)))
        self.held = self.tails
        self.late_dropped = 0

    def to_bytes(self) -> bytes:
        """The state to store (the tails, the held readings, the late count), pickled."""
        return pickle.dumps((self.tails, self.held, self.late_dropped), protocol=5)

    def restore(self, stored: bytes) -> None:
        """Take back what `to_bytes` stored (the parameters are the caller's, not stored).

        >>> tails = SilenceTails()
        >>> _ = tails.advance(pd.DataFrame({"entity_id": ["s1"], "event_id": ["e0"],
        ...     "event_time": [5], "seq": [0]}), watermark_ms=0)
        >>> again = SilenceTails()
        >>> again.restore(tails.to_bytes())
        >>> again.due_ms, len(again.tails)
        (5, 0)
        """
        self.tails, self.held, self.late_dropped = pickle.loads(stored)

    @property
    def due_ms(self) -> int | None:
        """The earliest held reading's event time: the watermark past it releases it."""
        return int(self.held[EVENT_TIME].min()) if len(self.held) else None

    def advance(self, readings: pd.DataFrame, watermark_ms: int | None) -> list[Alert]:
        """Take `readings` (`COLUMNS`), release what the watermark passed (all for None), and
        return the silences the released readings end."""
        self._hold(_frame(readings))
        if watermark_ms is None:
            released, self.held = self.held, self.held.iloc[:0]
        else:
            due = self.held[EVENT_TIME].to_numpy() <= watermark_ms
            released, self.held = self.held[due], self.held[~due]
        alerts = self._judge(released) if len(released) else []
        if self.ttl_ms is not None and watermark_ms is not None and len(self.tails):
            latest = self.tails.groupby(ENTITY, sort=False)[EVENT_TIME].transform("max")
            self.tails = self.tails[latest.to_numpy() >= watermark_ms - self.ttl_ms]
        return alerts

    def _hold(self, rows: pd.DataFrame) -> None:
        if len(self.tails) and len(rows):
            latest = self.tails.groupby(ENTITY, sort=False)[EVENT_TIME].max()
            since = rows[ENTITY].map(latest).to_numpy(float)
            late = rows[EVENT_TIME].to_numpy() < since  # NaN (a new device): never late
            self.late_dropped += int(late.sum())
            rows = rows[~late & ~_keys(rows).isin(_keys(self.tails)).to_numpy()]
        if len(rows):
            held = pd.concat([self.held, rows], ignore_index=True)
            self.held = held.drop_duplicates([ENTITY, EVENT_ID], ignore_index=True)

    def _judge(self, released: pd.DataFrame) -> list[Alert]:
        """Alerts of the released readings' gaps, each device's tail before them; the tails
        move on to the last `history + 1` readings."""
        touched = self.tails[ENTITY].isin(released[ENTITY].unique()).to_numpy()
        frame = pd.concat(
            [self.tails[touched].assign(**{_NEW: False}), released.assign(**{_NEW: True})],
            ignore_index=True,
        ).sort_values([ENTITY, _NEW, EVENT_TIME, EVENT_ID], kind="stable", ignore_index=True)
        alerts = self._silences(frame)
        kept = frame.groupby(ENTITY, sort=False).tail(self.params.history + 1)
        self.tails = pd.concat([self.tails[~touched], kept.drop(columns=_NEW)], ignore_index=True)
        return alerts

    def _silences(self, frame: pd.DataFrame) -> list[Alert]:
        entity = frame[ENTITY].to_numpy(object)
        times = frame[EVENT_TIME].to_numpy(np.int64)
        seqs = frame[SEQ].to_numpy(float)
        index = np.arange(len(frame))
        starts = np.r_[True, entity[1:] != entity[:-1]]
        first = np.maximum.accumulate(np.where(starts, index, 0))
        gaps = np.where(starts, np.nan, np.diff(times, prepend=times[:1]).astype(float))
        steps = np.where(starts, np.nan, np.diff(seqs, prepend=seqs[:1]))
        intervals = learned_intervals(gaps, self.params, first=first + 1)
        judged = frame[_NEW].to_numpy(bool) & ~starts
        fired = judged & silence_fires(gaps, intervals, self.params, steps)
        ids = frame[EVENT_ID].to_numpy(object)
        return [
            Alert.make(
                RULE,
                str(entity[i]),
                int(times[i]),
                (str(ids[i - 1]), str(ids[i])),
                silence_evidence(gaps[i], intervals[i], self.params),
                (str(ids[i - 1]), str(ids[i])),
                self.label,
            )
            for i in np.flatnonzero(fired).tolist()
        ]
