"""The delivery model: from a reading's true time to its emit time, or to its loss.

Per event: a network delay; a chance of loss (at-most-once) or of a retry (at-least-once).
Per device (the row's `dev`: the entity itself, or the terminal a scenario routes it through):
connectivity outages. During one the device stores readings (up to a cap, dropping
the oldest or the newest beyond it) and flushes the backlog on reconnect, in order or shuffled,
possibly sending some of it twice. A scenario may also take a device offline itself (a vehicle
in a tunnel) by giving readings a reconnect time: they are held like an outage's.
Every draw is made for every reading, in generation order, so the stream depends on config and
seed only. Everything is vectorised; the buffer of held readings is bounded by the caps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulators.distributions import sample_per_group
from simulators.entities import EntityTable
from simulators.intervals import IntervalSchedule
from simulators.records import BUFFER_OVERFLOW, NETWORK, NO_ID, concat, group_ranks, take

_NEVER = np.iinfo(np.int64).max


@dataclass
class Routed:
    """What one step of the delivery model decided: sends (with emit_ms) and losses."""

    sends: np.ndarray
    drops: np.ndarray


class DeliveryModel:
    def __init__(
        self, table: EntityTable, rng: np.random.Generator, start_ms: int, dtype: np.dtype
    ):
        """`table`: the devices (the entities, unless the scenario has devices of its own)."""
        settings = [c.delivery for c in table.classes]
        self._rng = rng
        self._class_of = table.class_of
        self._delays = [s.delay_s for s in settings]
        self._retries = [s.duplicates.retry_delay_s for s in settings]
        self._max_delay_s = np.array([s.max_delay_s for s in settings])
        self._p_drop = table.per_entity([s.drops.probability for s in settings])
        self._p_dup = table.per_entity([s.duplicates.probability for s in settings])
        self._cap = np.array([s.outages.buffer_cap for s in settings], dtype=np.int64)
        self._drop_newest = np.array([s.outages.drop_policy == "drop_newest" for s in settings])
        self._shuffled = np.array([s.outages.flush == "shuffled" for s in settings])
        self._flush_ms = np.array([1000.0 / s.outages.flush_rate for s in settings])
        self.outages = IntervalSchedule(
            table.per_entity([s.outages.rate_per_hour for s in settings]),
            table.class_of,
            [s.outages.duration_s for s in settings],
            rng,
            start_ms,
        )
        self._dtype = dtype
        self._parts: list[np.ndarray] = []  # the held rows, appended to without copying
        self._held_n = 0
        self._next_due = _NEVER  # the earliest reconnect among held rows
        self._per_outage: dict[int, int] = {}  # held rows per outage
        self._last_outage = np.full(len(table), NO_ID, dtype=np.int64)
        self._own_until = np.full(len(table), NO_ID, dtype=np.int64)  # scenario outages
        self._own_id = np.full(len(table), NO_ID, dtype=np.int64)
        self._p_flush_dup = np.array([s.outages.flush_duplicates for s in settings])
        self.outages_seen = 0

    def route(self, rows: np.ndarray) -> Routed:
        """Decide the fate of freshly generated rows (sorted by true time). `reconnect_ms` may
        come filled in by the scenario (`Readings.offline_until`): an outage of its own."""
        own_until = rows["reconnect_ms"].copy()
        self._draw(rows)
        episodes = self.outages.classify(rows["dev"], rows["true_ms"])
        rows["outage"] = episodes.id
        rows["reconnect_ms"] = np.where(episodes.id != NO_ID, episodes.end_ms, NO_ID)
        own = own_until > np.maximum(rows["reconnect_ms"], rows["true_ms"])  # it ends later
        if own.any():
            rows["outage"][own] = self._own_outage_ids(rows["dev"][own], own_until[own])
            rows["reconnect_ms"][own] = own_until[own]
        buffered = rows["outage"] != NO_ID
        direct = take(rows, ~buffered)
        sends, drops = self._transmit(direct, direct["true_ms"] + direct["delay_ms"])
        overflow = self._hold(take(rows, buffered))
        return Routed(sends, concat([drops, overflow], rows.dtype))

    def _own_outage_ids(self, dev: np.ndarray, until: np.ndarray) -> np.ndarray:
        """One id per (device, reconnect time): rows of one scenario outage share it across
        steps; ids come from the outage schedule's counter, so they never clash with its own."""
        if (
            dev.size
            and int(dev.max()) < 1 << 20
            and int(until.min()) >= 0
            and until.max() < 1 << 43
        ):
            # one int64 key sorts as (device, time) does: np.unique on it is ~10x faster
            keys, inverse = np.unique((dev.astype(np.int64) << 43) | until, return_inverse=True)
            p_dev, p_until = keys >> 43, keys & ((1 << 43) - 1)
        else:
            pairs, inverse = np.unique(
                np.stack([dev.astype(np.int64), until]), axis=1, return_inverse=True
            )
            p_dev, p_until = pairs
        ids = np.where(self._own_until[p_dev] == p_until, self._own_id[p_dev], NO_ID)
        new = ids == NO_ID
        ids[new] = self.outages.new_ids(int(new.sum()))
        last = np.r_[p_dev[1:] != p_dev[:-1], True]  # pairs sort by device, then time
        self._own_until[p_dev[last]] = p_until[last]
        self._own_id[p_dev[last]] = ids[last]
        return ids[inverse.reshape(-1)]

    @property
    def held(self) -> np.ndarray:
        """Every held row (one array; joined on demand)."""
        if len(self._parts) != 1:
            self._parts = [concat(self._parts, self._dtype)] if self._parts else []
        return self._parts[0] if self._parts else np.zeros(0, dtype=self._dtype)

    @held.setter
    def held(self, rows: np.ndarray) -> None:
        self._parts = [rows] if rows.shape[0] else []
        self._held_n = int(rows.shape[0])
        self._next_due = int(rows["reconnect_ms"].min()) if rows.shape[0] else _NEVER
        ids, counts = np.unique(rows["outage"], return_counts=True)
        self._per_outage = dict(zip(ids.tolist(), counts.tolist(), strict=True))

    def release(self, now_ms: int) -> Routed:
        """Flush the backlogs of outages that ended before `now_ms`."""
        if self._next_due >= now_ms:  # nothing due: no pass over the held rows
            empty = np.zeros(0, dtype=self._dtype)
            return Routed(empty, empty)
        due = self.held["reconnect_ms"] < now_ms
        if not due.any():
            return Routed(self.held[:0], self.held[:0])
        rows, self.held = take(self.held, due), take(self.held, ~due)
        rows = take(rows, np.lexsort((rows["true_ms"], rows["outage"])))
        cls = self._class_of[rows["dev"]]
        shuffle_key = self._rng.random(rows.shape[0])
        order_key = np.where(self._shuffled[cls], shuffle_key, 0.0)
        slot = np.empty(rows.shape[0], dtype=np.int64)
        by_slot = np.lexsort((np.arange(rows.shape[0]), order_key, rows["outage"]))
        slot[by_slot] = group_ranks(rows["outage"][by_slot])
        first = np.r_[True, rows["outage"][1:] != rows["outage"][:-1]]
        base_delay = rows["delay_ms"][first][np.cumsum(first) - 1]
        emit = (
            rows["reconnect_ms"]
            + base_delay
            + np.floor(slot * self._flush_ms[cls]).astype(np.int64)
        )
        if self._p_flush_dup.any():  # drawn only when used: other streams stay as they were
            resent = self._rng.random(rows.shape[0]) < self._p_flush_dup[cls]
            rows["retried"] |= resent & ~rows["lost"]
        sends, drops = self._transmit(rows, emit)
        return Routed(sends, drops)

    def reconnect_all(self, at_ms: int) -> None:
        """The run is over: every outage still going ends now, so backlogs flush."""
        held = self.held
        held["reconnect_ms"] = np.minimum(held["reconnect_ms"], at_ms)
        self.held = held

    @property
    def backlog(self) -> int:
        return self._held_n

    def _draw(self, rows: np.ndarray) -> None:
        n = rows.shape[0]
        dev = rows["dev"]
        cls = self._class_of[dev]
        lost = self._rng.random(n) < self._p_drop[dev]
        retried = ~lost & (self._rng.random(n) < self._p_dup[dev])
        delay_s = np.clip(sample_per_group(self._rng, self._delays, cls), 0, self._max_delay_s[cls])
        retry_s = np.clip(
            sample_per_group(self._rng, self._retries, cls), 0, self._max_delay_s[cls]
        )
        rows["lost"], rows["retried"] = lost, retried
        rows["delay_ms"] = np.rint(delay_s * 1000).astype(np.int64)
        rows["retry_ms"] = np.rint(retry_s * 1000).astype(np.int64)

    def _transmit(self, rows: np.ndarray, emit_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Send rows at `emit_ms`: lost ones become drops, retried ones are sent again."""
        lost = rows["lost"]
        drops = take(rows, lost)
        drops["dropped"] = NETWORK
        sent = take(rows, ~lost)
        sent["emit_ms"] = emit_ms[~lost]
        retries = take(sent, sent["retried"])
        retries["emit_ms"] += retries["retry_ms"]
        retries["dup"] = True
        return concat([sent, retries], rows.dtype), drops

    def _hold(self, rows: np.ndarray) -> np.ndarray:
        """Add rows to their outage's buffer; return what the caps push out."""
        if rows.shape[0] == 0:
            return rows
        self._count_outages(rows)
        if self._append(rows):
            return rows[:0]
        touched = np.isin(self.held["outage"], rows["outage"])
        group = concat([take(self.held, touched), rows], rows.dtype)
        keep_others = take(self.held, ~touched)
        outage = group["outage"]
        cls = self._class_of[group["dev"]]
        from_start = group_ranks(outage)
        from_end = group_ranks(outage[::-1])[::-1]
        cap = self._cap[cls]
        over = np.where(self._drop_newest[cls], from_start >= cap, from_end >= cap)
        overflow = take(group, over)
        overflow["dropped"] = BUFFER_OVERFLOW
        self.held = concat([keep_others, take(group, ~over)], rows.dtype)
        return overflow

    def _append(self, rows: np.ndarray) -> bool:
        """Hold rows without touching those already held, when no buffer reaches its cap (the
        common case: a long store-and-forward, such as a ship at sea, would otherwise copy its
        whole backlog at every step). The result is the same as `_hold`'s general case."""
        ids, first, counts = np.unique(rows["outage"], return_index=True, return_counts=True)
        have = np.array([self._per_outage.get(i, 0) for i in ids.tolist()], dtype=np.int64)
        cap = self._cap[self._class_of[rows["dev"][first]]]
        if ((have + counts) > cap).any():
            return False
        self._parts.append(rows)
        self._held_n += int(rows.shape[0])
        self._next_due = min(self._next_due, int(rows["reconnect_ms"].min()))
        for i, n in zip(ids.tolist(), (have + counts).tolist(), strict=True):
            self._per_outage[i] = n
        return True

    def _count_outages(self, rows: np.ndarray) -> None:
        """Count outages that buffered at least one reading (ids only grow per device)."""
        ids, first = np.unique(rows["outage"], return_index=True)
        owners = rows["dev"][first]
        self.outages_seen += int((ids != self._last_outage[owners]).sum())
        self._last_outage[owners] = ids
