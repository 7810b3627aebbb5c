"""Cardholder profiles (`cards.profiles`, compacted): the issuer's view of each card's history,
which the spending rule judges a purchase against.

`ProfileStore` holds the latest profile per card token; `ProfileUpdater` fills it in a
background thread, reading the compacted topic from the beginning on start (the endpoint
waits for that rebuild like the last-use state's) and then following it, so profiles
published later (a new run's) arrive too. Malformed records are counted and skipped.

`ProfileStore.check` is the rule: `detectors.cards.spending.check_profile_spending` on the profile's
features (purchases over the period, the typical ticket, purchases in this MCC).
"""

from __future__ import annotations

import threading
from typing import Any

from confluent_kafka import Consumer

from api.fraud.updater import RecordUpdater
from core.config import StackConfig
from core.contracts import CARD_PROFILE
from core.kafka.compacted import ensure_compacted
from detectors import Alert
from detectors.cards.spending import (
    ProfileFeatures,
    SpendingParams,
    check_profile_spending,
    profile_features,
)

#: Keys a profile needs for the rule.
PROFILE_KEYS = ("card_token", "typical_amount", "history_count", "category_counts")


class ProfileStore:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.features: dict[str, ProfileFeatures] = {}

    def __len__(self) -> int:
        return len(self.features)

    def put(self, record: dict[str, Any]) -> None:
        """Keep a `cards.profile/1` record's features; ValueError when it is not one."""
        if record.get("schema") != CARD_PROFILE.id or any(k not in record for k in PROFILE_KEYS):
            raise ValueError("not a cards.profile record")
        value = profile_features(record)
        with self.lock:
            self.features[str(record["card_token"])] = value

    def devices(self, token: str) -> frozenset[str]:
        """The devices the card's profile lists (none without a profile)."""
        found = self.features.get(token)
        return frozenset() if found is None else found[3]

    def check(
        self,
        token: str,
        event_id: str,
        event_time: int,
        amount: float,
        category: str,
        params: SpendingParams,
        device: str | None = None,
    ) -> Alert | None:
        """The spending rule against the card's profile; None without one.

        >>> store = ProfileStore()
        >>> store.put({"schema": "cards.profile/1", "card_token": "t", "typical_amount": 30.0,
        ...            "history_count": 400, "category_counts": {"5411": 390, "5732": 1},
        ...            "devices": ["dv-1"]})
        >>> new = SpendingParams(devices="new")
        >>> store.check("t", "tx", 0, 900.0, "5732", new, "dv-9").label
        'account_takeover'
        >>> store.check("t", "tx", 0, 900.0, "5732", new, "dv-1") is None
        True
        >>> store.check("t", "tx", 0, 900.0, "5411", SpendingParams()) is None
        True
        """
        found = self.features.get(token)
        if found is None:
            return None
        return check_profile_spending(
            token, event_id, event_time, amount, category, found, params, device
        )


class ProfileUpdater(RecordUpdater):
    """`cards.profiles` -> the profile store: the last-use updater's consumer loop, applying
    profiles instead of decisions (no lookback: a compacted topic is read whole)."""

    def __init__(self, stack: StackConfig, topic: str, store: ProfileStore) -> None:
        super().__init__(stack, topic, store, "profiles")
        self.store: ProfileStore = store

    def _connect(self) -> Consumer | None:
        """Create the topic compacted before the consumer loop would create it plain."""
        while not self._stop.is_set():
            try:
                ensure_compacted(self.stack, self.topic, timeout_s=10.0)
                break
            except Exception as exc:  # Kafka not up yet: the loop below retries too
                self._retrying("cannot create the profiles topic yet", exc)
                self._stop.wait(1.0)
        return super()._connect()
