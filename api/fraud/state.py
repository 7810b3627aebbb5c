"""The last-use state: per card token, what the detectors need, plus the verdict cache.

The state is only ever derived from `cards.activity` records: the endpoint applies the record
of each decision it makes as soon as it makes it (so the card's next request sees it), and the
updater applies the records it consumes from the topic (other instances' decisions, and on
start everything the topic holds). A record is applied once: the verdict cache, keyed by
transaction_id, says which records are in, and the detectors' states ignore a repeated id too.

Per card (`CardState`):
- `travel`: the detectors' `TravelState` (the last located, card-present uses);
- `velocity`: the detectors' `VelocityState` (recent transaction times, amounts, merchants);
- `last_use`: the latest use in event time, any channel, with its decision.

Per merchant (or terminal, `terminal_key`): the detectors' `TerminalState`, the uses inside
the compromised-terminal window and whether its burst has alerted. Merchants are kept least
recently used first; ones whose uses all fell out of the window behind the latest event time
applied are dropped as requests come (a fresh state judges their next use the same), and the
count is capped at `state.max_merchants`.

All access goes through `lock`: the event loop decides, the updater thread applies.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from api.fraud.settings import ApiSettings
from api.fraud.verdict import body_of_value
from detectors import TerminalState, TravelState, VelocityState

Record = Mapping[str, Any]

#: Fields of a record kept as the card's last use.
LAST_USE_FIELDS = (
    "transaction_id",
    "event_time",
    "channel",
    "amount",
    "currency",
    "merchant_id",
    "country",
    "lat",
    "lon",
    "decision",
    "decided_at",
)


@dataclass(slots=True)
class CardState:
    travel: TravelState
    velocity: VelocityState
    last4: str
    last_use: dict[str, Any] | None = None


@dataclass(slots=True)
class VerdictCache:
    """transaction_id -> the verdict body; bounded by count (LRU) and age (decided_at).

    An entry holds the body itself (a decision made here: the body was built to answer it),
    or the record's published bytes (one applied from the topic: its body is built from them
    only if a retry asks, `verdict.body_of_value`; most such records are never asked for)."""

    max_entries: int
    ttl_ms: int
    #: transaction_id -> (expires_at, bytes, whether the bytes are the body or the record).
    entries: OrderedDict[str, tuple[int, bytes, bool]] = field(default_factory=OrderedDict)

    def get(self, transaction_id: str, now_ms: int) -> bytes | None:
        entry = self.entries.get(transaction_id)
        if entry is None:
            return None
        expires_at, data, is_body = entry
        if expires_at <= now_ms:
            del self.entries[transaction_id]
            return None
        if not is_body:
            data = body_of_value(data)
            self.entries[transaction_id] = (expires_at, data, True)
        self.entries.move_to_end(transaction_id)
        return data

    def __contains__(self, transaction_id: object) -> bool:
        return transaction_id in self.entries

    def put(
        self, transaction_id: str, data: bytes, decided_at: int, now_ms: int, is_body: bool = True
    ) -> None:
        """`data`: the verdict body, or (`is_body=False`) the record's published bytes."""
        expires_at = decided_at + self.ttl_ms
        if expires_at <= now_ms:
            return
        if is_body:  # orjson's output keeps a ~4 KiB buffer whatever its length: an exact copy
            data = bytes(memoryview(data))
        self.entries[transaction_id] = (expires_at, data, is_body)
        self.entries.move_to_end(transaction_id)
        while len(self.entries) > self.max_entries:
            self.entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self.entries)


def merchant_key(merchant_id: str, terminal_id: str | None, settings: ApiSettings) -> str:
    """What the terminal rule counts cards at (`settings.terminal_key`)."""
    if settings.terminal_key == "terminal" and terminal_id:
        return terminal_id
    return merchant_id


class LastUseState:
    def __init__(self, settings: ApiSettings, clock: Callable[[], int]) -> None:
        self.settings = settings
        self.clock = clock
        self.lock = threading.Lock()
        self.cards: OrderedDict[str, CardState] = OrderedDict()
        self.merchants: OrderedDict[str, TerminalState] = OrderedDict()
        self.latest_ms: int | None = None  # the latest event time applied, for eviction
        self.verdicts = VerdictCache(
            settings.idempotency.max_entries, round(settings.idempotency.ttl_s * 1000)
        )

    def card(self, token: str) -> CardState | None:
        """The card's state, marked as recently used (call with `lock` held)."""
        card = self.cards.get(token)
        if card is not None:
            self.cards.move_to_end(token)
        return card

    def merchant(self, key: str) -> TerminalState | None:
        """The merchant's terminal-rule state (call with `lock` held)."""
        return self.merchants.get(key)

    def knows(self, transaction_id: str) -> bool:
        """Whether the record of this transaction is in (call with `lock` held)."""
        return transaction_id in self.verdicts

    def apply(self, record: Record, body: bytes, is_body: bool = True) -> None:
        """Apply one decision record and remember its verdict body, or (`is_body=False`) the
        record's published bytes to build the body from if a retry asks (call with `lock`
        held)."""
        token = record["card_token"]
        card = self.card(token)
        if card is None:
            card = self._new_card(token, record["card_last4"])
        txid = record["transaction_id"]
        event_time = int(record["event_time"])
        anchor = record["card_present"] and (
            record["decision"] != "decline" or self.settings.state.anchor_declined
        )
        card.travel.add(txid, event_time, record["lat"], record["lon"], card_present=anchor)
        card.velocity.add(txid, event_time, float(record["amount"]), record["merchant_id"])
        if self.settings.terminal is not None:
            key = merchant_key(record["merchant_id"], record.get("terminal_id"), self.settings)
            self._add_use(key, txid, event_time, token)
        last = card.last_use
        if last is None or (event_time, txid) >= (last["event_time"], last["transaction_id"]):
            card.last_use = {k: record[k] for k in LAST_USE_FIELDS}
        self.verdicts.put(txid, body, int(record["decided_at"]), self.clock(), is_body)

    def _add_use(self, key: str, txid: str, event_time: int, token: str) -> None:
        """Count a use at a merchant; drop merchants idle a whole window (amortized O(1):
        each is dropped once) and the least recently used beyond `max_merchants`."""
        merchants = self.merchants
        merchant = merchants.get(key)
        if merchant is None:
            merchant = TerminalState(
                key, self.settings.terminal, max_uses=self.settings.state.uses_per_merchant
            )
            merchants[key] = merchant
        else:
            merchants.move_to_end(key)
        merchant.add(txid, event_time, token)
        latest = event_time if self.latest_ms is None else max(self.latest_ms, event_time)
        self.latest_ms = latest
        cap = self.settings.state.max_merchants
        while merchants:
            if len(merchants) <= cap and not next(iter(merchants.values())).idle_since(latest):
                break
            merchants.popitem(last=False)

    def _new_card(self, token: str, last4: str) -> CardState:
        s = self.settings
        history = s.state.transactions_per_card
        card = CardState(
            travel=TravelState(
                token, s.travel, max_positions=s.state.positions_per_card, max_seen=history
            ),
            velocity=VelocityState(token, s.velocity, max_events=history, max_seen=history),
            last4=last4,
        )
        self.cards[token] = card
        while len(self.cards) > s.state.max_cards:
            self.cards.popitem(last=False)
        return card
