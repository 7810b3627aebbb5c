"""Card uses as columns, and the buffer of uses planned ahead (trips, fraud incidents).

A `Uses` batch is what becomes engine readings: the card, the true time, the device (POS
terminal or online gateway), the amount, the label and incident, the hard-negative mark, and
the payer's own device (`payers`).
Trips and incidents decide their uses when they start, for hours or days ahead; `PlannedUses`
holds them sorted by true time and hands out each tick's share.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from scenarios.cards.payers import HOLDER
from simulators.records import NO_ID, Readings

# hard_negative codes (0: not one); names in config HARD_NEGATIVES order, from 1.
NOT_HARD, REAL_FLIGHT, BORDER_NEIGHBOURS, ONLINE_WHILE_TRAVELLING = 0, 1, 2, 3
BUSY_MERCHANT, LARGE_PURCHASE = 4, 5


@dataclass
class Uses:
    ent: np.ndarray  # int32 card
    true_ms: np.ndarray  # int64
    dev: np.ndarray  # int32 device
    amount: np.ndarray  # float64
    label: np.ndarray  # int16: 0 none, else 1 + CARD_FRAUDS index
    incident: np.ndarray  # int64, NO_ID when none
    hard_negative: np.ndarray  # int32 code
    payer: np.ndarray  # int64 payer device code (`payers`): HOLDER until assigned

    def __len__(self) -> int:
        return int(self.ent.shape[0])

    @classmethod
    def make(
        cls,
        ent: np.ndarray,
        true_ms: np.ndarray,
        dev: np.ndarray,
        amount: np.ndarray,
        label: int | np.ndarray = 0,
        incident: int | np.ndarray = NO_ID,
        hard_negative: int | np.ndarray = NOT_HARD,
        payer: int | np.ndarray = HOLDER,
    ) -> Uses:
        n = ent.shape[0]
        return cls(
            ent=ent.astype(np.int32),
            true_ms=np.asarray(true_ms).astype(np.int64),
            dev=dev.astype(np.int32),
            amount=np.asarray(amount, dtype=np.float64),
            label=np.broadcast_to(np.asarray(label, dtype=np.int16), (n,)).copy(),
            incident=np.broadcast_to(np.asarray(incident, dtype=np.int64), (n,)).copy(),
            hard_negative=np.broadcast_to(np.asarray(hard_negative, dtype=np.int32), (n,)).copy(),
            payer=np.broadcast_to(np.asarray(payer, dtype=np.int64), (n,)).copy(),
        )

    @classmethod
    def empty(cls) -> Uses:
        e = np.zeros(0, dtype=np.int64)
        return cls.make(e, e, e, np.zeros(0))

    @classmethod
    def concat(cls, parts: Sequence[Uses]) -> Uses:
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        return cls(
            **{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)}
        )

    def take(self, index: np.ndarray | slice) -> Uses:
        return Uses(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def readings(self) -> Readings:
        return Readings(
            ent=self.ent,
            true_ms=self.true_ms,
            label=self.label,
            incident=self.incident,
            payload={
                "amount": self.amount,
                "hard_negative": self.hard_negative,
                "payer": self.payer,
            },
            dev=self.dev,
        )


class PlannedUses:
    """Uses decided ahead of their time, handed out in true-time order.

    A calendar of buckets `bucket_ms` wide: a trip's uses days ahead wait in their own bucket,
    untouched, until it comes due; each pop sorts only the due buckets.
    """

    def __init__(self, bucket_ms: int = 600_000) -> None:
        self._width = bucket_ms
        self._buckets: dict[int, list[Uses]] = {}
        self._keys: list[int] = []  # heap of the buckets' keys
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, uses: Uses) -> None:
        if not len(uses):
            return
        keys = uses.true_ms // self._width
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        firsts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        ends = np.r_[firsts[1:], keys.shape[0]]
        for key, a, b in zip(keys[firsts].tolist(), firsts.tolist(), ends.tolist(), strict=True):
            if key not in self._buckets:
                self._buckets[key] = []
                heapq.heappush(self._keys, key)
            self._buckets[key].append(uses.take(order[a:b]))
        self._count += len(uses)

    def pop_before(self, t_ms: int) -> Uses:
        last = t_ms // self._width
        due = []
        while self._keys and self._keys[0] <= last:
            due.append(heapq.heappop(self._keys))
        if not due:
            return Uses.empty()
        held = Uses.concat([part for k in due for part in self._buckets.pop(k)])
        held = held.take(np.argsort(held.true_ms, kind="stable"))
        cut = int(np.searchsorted(held.true_ms, t_ms, side="left"))
        if cut < len(held):  # the bucket holding t_ms keeps its later uses
            self._buckets[last] = [held.take(slice(cut, None))]
            heapq.heappush(self._keys, last)
        self._count -= cut
        return held.take(slice(0, cut))
