"""Per-card stateful rules in event-time order: impossible travel and account takeover.

`CardRules` holds one card's state (see `pipeline.series_processor.BufferedRules`): an
`EventTimeBuffer` of its not-yet-released uses, the detectors' `TravelState` and
`SpendingState`. Uses are fed to the rules only when the watermark passes them, in
(event_time, event_id) order, so the alerts are those of the event-time-sorted stream
whatever the arrival order (the NY use arriving before the Paris one still gives the one
Paris -> NY alert) and a restarted query reproduces them.

`CardRulesProcessor` runs it in `transformWithStateInPandas` (time mode EventTime) with one
`ValueState` and one event-time timer per card (`BufferedRulesProcessor`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from detectors import Alert, SpendingParams, SpendingState, TravelParams, TravelState
from pipeline.series_processor import STATE_DDL, BufferedRules, BufferedRulesProcessor

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

__all__ = ["INPUT_COLUMNS", "STATE_DDL", "CardRules", "CardRulesProcessor"]


def _float_or_none(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else number


def _bool_or_none(value: Any) -> bool | None:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return bool(value)


class CardRules(BufferedRules):
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

    __slots__ = ("spending", "travel")

    def __init__(
        self,
        card: str,
        travel: TravelParams | None,
        spending: SpendingParams | None,
        max_buffered: int = 10_000,
    ) -> None:
        super().__init__(max_buffered)
        self.travel = None if travel is None else TravelState(card, travel)
        self.spending = None if spending is None else SpendingState(card, spending)

    def push(  # type: ignore[override]
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
        return super().push(event_id, event_time, payload)

    def feed(self, event_id: str, event_time: int, payload: Any) -> list[Alert]:
        lat, lon, card_present, amount, category = payload
        alerts: list[Alert] = []
        if self.travel is not None:
            alerts.extend(self.travel.update(event_id, event_time, lat, lon, card_present))
        if self.spending is not None and amount is not None:
            alerts.extend(self.spending.update(event_id, event_time, amount, category))
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
        return super().next_timer(ttl_ms)

    def expired(self, watermark_ms: int, ttl_ms: int | None) -> bool:
        """Nothing buffered and the watermark `ttl_ms` past the latest use: forget the card.

        >>> rules = CardRules("card-1", TravelParams(), None)
        >>> _ = rules.push("t1", 1_000, None, None, False, 5.0, "food")
        >>> _ = rules.release(1_000)
        >>> rules.expired(60_000, ttl_ms=60_000), rules.expired(61_000, ttl_ms=60_000)
        (False, True)
        """
        return super().expired(watermark_ms, ttl_ms)

    def rules_snapshot(self) -> dict[str, Any]:
        return {
            "travel": None if self.travel is None else self.travel.snapshot(),
            "spending": None if self.spending is None else self.spending.snapshot(),
        }

    def rules_restore(self, data: Mapping[str, Any]) -> None:
        if self.travel is not None and data.get("travel") is not None:
            self.travel.restore(data["travel"])
        if self.spending is not None and data.get("spending") is not None:
            self.spending.restore(data["spending"])


class CardRulesProcessor(BufferedRulesProcessor):
    """`CardRules` per card in `transformWithStateInPandas` (see the module docstring)."""

    input_columns = INPUT_COLUMNS
    state_name = "card"

    def __init__(
        self,
        travel: TravelParams | None,
        spending: SpendingParams | None,
        ttl_ms: int | None = None,
    ) -> None:
        super().__init__(ttl_ms)
        self.travel_params = travel
        self.spending_params = spending

    def new_rules(self, key: str) -> BufferedRules:
        return CardRules(key, self.travel_params, self.spending_params)

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
        rules = self._load(str(key[0]))
        assert isinstance(rules, CardRules)
        for frame in rows:
            for row in frame.loc[:, list(INPUT_COLUMNS)].itertuples(index=False):
                rules.push(*row)
        alerts = rules.release(timerValues.getCurrentWatermarkInMs())
        self._save(rules)
        return self._emit(alerts)
