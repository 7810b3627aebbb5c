"""Per-card stateful rules in event-time order: impossible travel and account takeover.

`CardRules` holds one card's state: an `EventTimeBuffer` of its not-yet-released uses, the
detectors' `TravelState` and `SpendingState`. Uses are buffered as they arrive and fed to the
rules only when the watermark passes them, in (event_time, event_id) order, so the alerts are
those of the event-time-sorted stream whatever the arrival order (the NY use arriving before
the Paris one still gives the one Paris -> NY alert) and a restarted query reproduces them.
The cost is latency: a use is judged once the watermark passes it.

`CardRulesProcessor` runs it in `transformWithStateInPandas` (time mode EventTime): one
`ValueState` (`state STRING`, the JSON snapshot) and one event-time timer per card, at its
earliest buffered use. When the watermark passes it, the timer releases the buffer up to the
watermark, emits the alert rows (`ALERT_SPARK_DDL`) and moves to the next buffered use. Spark's
state TTL is processing-time only (not allowed in EventTime mode), so with nothing buffered the
timer instead waits for `ttl_ms` after the card's latest use, then forgets the card.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

import pandas as pd
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from detectors import (
    ALERT_COLUMNS,
    Alert,
    EventTimeBuffer,
    SpendingParams,
    SpendingState,
    TravelParams,
    TravelState,
    alerts_to_frame,
)

#: Input columns of the processor (beyond the grouping key `card_token`).
INPUT_COLUMNS = (
    "event_id",
    "event_time",
    "lat",
    "lon",
    "card_present",
    "amount",
    "merchant_category",
)
STATE_DDL = "state STRING"


def _float_or_none(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else number


def _bool_or_none(value: Any) -> bool | None:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return bool(value)


class CardRules:
    """One card's buffered uses and rule states; `None` params switch a rule off.

    >>> rules = CardRules("card-1", TravelParams(), None)
    >>> rules.push("ny", 1_800_000, 40.7128, -74.0060, True, 80.0, "food")  # arrives first
    True
    >>> rules.push("paris", 0, 48.8566, 2.3522, True, 20.0, "food")
    True
    >>> rules.release(watermark_ms=0)  # only Paris is behind the watermark
    []
    >>> [a.event_ids for a in rules.release(watermark_ms=1_800_000)]
    [('paris', 'ny')]
    """

    __slots__ = ("buffer", "earliest_ms", "latest_ms", "spending", "timer_ms", "travel")

    def __init__(
        self,
        card: str,
        travel: TravelParams | None,
        spending: SpendingParams | None,
        max_buffered: int = 10_000,
    ) -> None:
        self.buffer = EventTimeBuffer(max_buffered)
        self.latest_ms: int | None = None  # the latest event time ever pushed
        self.earliest_ms: int | None = None  # the earliest event time buffered
        self.timer_ms: int | None = None  # the event-time timer registered for this card
        self.travel = None if travel is None else TravelState(card, travel)
        self.spending = None if spending is None else SpendingState(card, spending)

    def push(
        self,
        event_id: str,
        event_time: int,
        lat: float | None,
        lon: float | None,
        card_present: bool | None,
        amount: float | None,
        category: str | None,
    ) -> bool:
        """Buffer a use until the watermark passes it; False when it is already too late."""
        payload = [
            _float_or_none(lat),
            _float_or_none(lon),
            _bool_or_none(card_present),
            _float_or_none(amount),
            category,
        ]
        time_ms = int(event_time)
        if not self.buffer.push(time_ms, str(event_id), payload):
            return False
        self.latest_ms = time_ms if self.latest_ms is None else max(time_ms, self.latest_ms)
        self.earliest_ms = time_ms if self.earliest_ms is None else min(time_ms, self.earliest_ms)
        return True

    def release(self, watermark_ms: int | None) -> list[Alert]:
        """Feed the rules every use at or before the watermark, in event-time order."""
        alerts: list[Alert] = []
        released = self.buffer.release(watermark_ms)
        for event_time, event_id, (lat, lon, card_present, amount, category) in released:
            if self.travel is not None:
                alerts.extend(self.travel.update(event_id, event_time, lat, lon, card_present))
            if self.spending is not None and amount is not None:
                alerts.extend(self.spending.update(event_id, event_time, amount, category))
        if released:
            held = self.buffer.snapshot()["events"]
            self.earliest_ms = int(held[0][0]) if held else None
        return alerts

    def next_timer(self, ttl_ms: int | None) -> int | None:
        """When this card needs its timer: the earliest buffered use, else its expiry.

        >>> rules = CardRules("card-1", TravelParams(), None)
        >>> for event_id, time_ms in [("b", 2_000), ("a", 1_000), ("c", 3_000)]:
        ...     _ = rules.push(event_id, time_ms, None, None, False, 5.0, "food")
        >>> rules.next_timer(ttl_ms=60_000)
        1000
        >>> _ = rules.release(2_500)
        >>> rules.next_timer(ttl_ms=60_000)
        3000
        >>> _ = rules.release(3_000)
        >>> rules.next_timer(ttl_ms=60_000), rules.next_timer(ttl_ms=None)
        (63000, None)
        """
        if self.earliest_ms is not None:
            return self.earliest_ms
        if ttl_ms is None or self.latest_ms is None:
            return None
        return self.latest_ms + ttl_ms

    @property
    def buffered(self) -> int:
        return len(self.buffer)

    def expired(self, watermark_ms: int, ttl_ms: int | None) -> bool:
        """Nothing buffered and the watermark `ttl_ms` past the latest use: forget the card.

        >>> rules = CardRules("card-1", TravelParams(), None)
        >>> _ = rules.push("t1", 1_000, None, None, False, 5.0, "food")
        >>> _ = rules.release(1_000)
        >>> rules.expired(60_000, ttl_ms=60_000), rules.expired(61_000, ttl_ms=60_000)
        (False, True)
        """
        if ttl_ms is None or self.buffered or self.latest_ms is None:
            return False
        return watermark_ms >= self.latest_ms + ttl_ms

    def to_json(self) -> str:
        return json.dumps(
            {
                "buffer": self.buffer.snapshot(),
                "latest_ms": self.latest_ms,
                "earliest_ms": self.earliest_ms,
                "timer_ms": self.timer_ms,
                "travel": None if self.travel is None else self.travel.snapshot(),
                "spending": None if self.spending is None else self.spending.snapshot(),
            },
            separators=(",", ":"),
        )

    def load_json(self, text: str) -> None:
        data: Mapping[str, Any] = json.loads(text)
        self.buffer.restore(data["buffer"])
        self.latest_ms = data.get("latest_ms")
        self.earliest_ms = data.get("earliest_ms")
        self.timer_ms = data.get("timer_ms")
        if self.travel is not None and data.get("travel") is not None:
            self.travel.restore(data["travel"])
        if self.spending is not None and data.get("spending") is not None:
            self.spending.restore(data["spending"])


class CardRulesProcessor(StatefulProcessor):
    """`CardRules` per card in `transformWithStateInPandas` (see the module docstring)."""

    def __init__(
        self,
        travel: TravelParams | None,
        spending: SpendingParams | None,
        ttl_ms: int | None = None,
    ) -> None:
        self.travel_params = travel
        self.spending_params = spending
        self.ttl_ms = ttl_ms

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState("card", STATE_DDL)

    def _load(self, card: str) -> CardRules:
        rules = CardRules(card, self.travel_params, self.spending_params)
        stored = self.state.get()
        if stored is not None:
            rules.load_json(stored[0])
        return rules

    def _save(self, rules: CardRules) -> None:
        """Move the card's one timer where `rules` needs it, then store the state."""
        wanted = rules.next_timer(self.ttl_ms)
        if wanted != rules.timer_ms:
            if rules.timer_ms is not None:
                self.handle.deleteTimer(rules.timer_ms)
            if wanted is not None:
                self.handle.registerTimer(wanted)
            rules.timer_ms = wanted
        self.state.update((rules.to_json(),))

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        rules = self._load(str(key[0]))
        for frame in rows:
            for row in frame.loc[:, list(INPUT_COLUMNS)].itertuples(index=False):
                rules.push(*row)
        self._save(rules)
        return iter([])

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        if not self.state.exists():
            return iter([])
        rules = self._load(str(key[0]))
        if rules.timer_ms == expiredTimerInfo.getExpiryTimeInMs():
            rules.timer_ms = None  # Spark has removed the timer that fired
        watermark = timerValues.getCurrentWatermarkInMs()
        alerts = rules.release(watermark)
        if rules.expired(watermark, self.ttl_ms):
            self.state.clear()
            if rules.timer_ms is not None:
                self.handle.deleteTimer(rules.timer_ms)
        else:
            self._save(rules)
        if not alerts:
            return iter([])
        return iter([alerts_to_frame(alerts).loc[:, list(ALERT_COLUMNS)]])

    def close(self) -> None:
        pass
