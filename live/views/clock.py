"""The fleet's estimated clock offsets, as the panel shows them: the latest row per device of a
compacted `<domain>.clock-offsets` topic (`pipeline.clock.offset_records`: key the device, value
`{"device_id", "offset_estimate_ms", "reset", "records", "as_of"}`), pure, no Kafka
(`live.consumers.clock` fills it).

A device has a row per regime: its clock as it runs (`reset: false`) and, while its clock is
reset to an epoch, the reset one. Its current offset is the regime with the newest `as_of`;
the fleet's histogram counts each device's running-clock offset once (a reset clock's offset
is decades, and says nothing about the fleet's skew), the devices whose newest row is a reset
apart.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from live.views.records import json_object

#: The histogram's bin width (s) unless asked otherwise.
BIN_S = 5.0
#: At most this many bins: a wider spread widens them.
MAX_BINS = 120


def offset_row(record: Any) -> dict[str, Any] | None:
    """A record's row, or None when it is not one.

    >>> offset_row({"device_id": "cv-1", "offset_estimate_ms": 1500, "reset": False,
    ...     "records": 9, "as_of": 60000})["offset_estimate_ms"]
    1500
    >>> offset_row({"device_id": "cv-1"}) is None
    True
    """
    if not isinstance(record, dict):
        return None
    device, offset, as_of = (record.get(k) for k in ("device_id", "offset_estimate_ms", "as_of"))
    if not isinstance(device, str) or not device:
        return None
    if not isinstance(offset, int | float) or not isinstance(as_of, int | float):
        return None
    records = record.get("records")
    return {
        "device_id": device,
        "offset_estimate_ms": int(offset),
        "reset": bool(record.get("reset")),
        "records": int(records) if isinstance(records, int | float) else None,
        "as_of": int(as_of),
    }


class OffsetTable:
    """The latest offset row per device and regime (thread-safe: one writer, many readers)."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, bool], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.records = 0
        self.malformed = 0

    def add_raw(self, value: bytes | None) -> None:
        if value is None:  # a tombstone
            return
        row = offset_row(json_object(value))
        if row is None:
            self.malformed += 1
            return
        self.add(row)

    def add(self, row: dict[str, Any]) -> None:
        key = (row["device_id"], row["reset"])
        with self._lock:
            self.records += 1
            held = self._rows.get(key)
            if held is None or row["as_of"] >= held["as_of"]:
                self._rows[key] = row

    def offset(self, device: str) -> dict[str, Any] | None:
        """The device's current row (its newest regime's), None if it has none."""
        with self._lock:
            found = [r for r in (self._rows.get((device, f)) for f in (False, True)) if r]
        return max(found, key=lambda r: r["as_of"]) if found else None

    def current(self) -> dict[str, dict[str, Any]]:
        """Device -> its current row."""
        with self._lock:
            rows = list(self._rows.values())
        out: dict[str, dict[str, Any]] = {}
        for row in rows:
            held = out.get(row["device_id"])
            if held is None or row["as_of"] > held["as_of"]:
                out[row["device_id"]] = row
        return out

    def histogram(self, bin_s: float = BIN_S) -> dict[str, Any]:
        """The fleet's running-clock offsets in `bin_s`-wide bins: `bins` [{"low_s",
        "high_s", "devices"}] (empty bins between the lowest and highest left in), `devices`
        counted, `in_reset` (devices whose newest row is a reset clock's: not counted),
        `p50_ms`, `max_abs_ms`.

        >>> t = OffsetTable()
        >>> for d, ms in [("a", -61_000), ("b", 2_000), ("c", 4_900)]:
        ...     t.add({"device_id": d, "offset_estimate_ms": ms, "reset": False,
        ...            "records": 1, "as_of": 1})
        >>> h = t.histogram(30)
        >>> [(b["low_s"], b["devices"]) for b in h["bins"]], h["devices"], h["max_abs_ms"]
        ([(-90.0, 1), (-60.0, 0), (-30.0, 0), (0.0, 2)], 3, 61000)
        """
        width = float(bin_s)
        current = self.current()
        in_reset = sum(1 for r in current.values() if r["reset"])
        with self._lock:
            offsets = [
                r["offset_estimate_ms"]
                for (device, reset), r in self._rows.items()
                if not reset and not current[device]["reset"]
            ]
        if not offsets:
            return {
                "bins": [],
                "devices": 0,
                "in_reset": in_reset,
                "p50_ms": None,
                "max_abs_ms": None,
                "bin_s": width,
            }
        span_s = (max(offsets) - min(offsets)) / 1000
        if span_s / width > MAX_BINS - 1:
            width = float(math.ceil(span_s / (MAX_BINS - 1)))
        counts: dict[int, int] = {}
        for ms in offsets:
            i = math.floor(ms / 1000 / width)
            counts[i] = counts.get(i, 0) + 1
        low, high = min(counts), max(counts)
        bins = [
            {"low_s": i * width, "high_s": (i + 1) * width, "devices": counts.get(i, 0)}
            for i in range(low, high + 1)
        ]
        ordered = sorted(offsets)
        return {
            "bins": bins,
            "devices": len(offsets),
            "in_reset": in_reset,
            "p50_ms": ordered[len(ordered) // 2],
            "max_abs_ms": max(abs(ms) for ms in offsets),
            "bin_s": width,
        }

    def stats(self) -> dict[str, int]:
        with self._lock:
            devices = len({device for device, _ in self._rows})
        return {"devices": devices, "records": self.records, "malformed": self.malformed}
