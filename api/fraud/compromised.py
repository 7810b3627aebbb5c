"""Compromised cards (`cards.compromised-cards`): the Bloom filters the cards job publishes of
the cards seen at a terminal while the compromised-terminal rule fired on it
(`pipeline.jobs.cards.bloom`). A card-not-present purchase (`CompromisedCardParams.channels`)
by a card in a filter, within `apply_s` after the filter's window ended, raises
`compromised_card` (label `compromised_terminal`), which the scoring sends to review: the
fraud-DB lookup of Dunning ch. 6, in constant memory per terminal window. Filters hold token
keys (`detectors.cards.bloom.token_key`), never card numbers; a false positive (a card never
at the terminal found in its filter) happens at about the filter's `fpp`.

`CompromisedCards` holds the filters; `CompromisedUpdater` fills it in a background thread
with the last-use updater's consumer loop: on start the records appended within `apply_s`
(older filters no longer apply; within `rebuild_lookback_s` when that is shorter), then the
ones that follow. Malformed records are counted and
skipped.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from api.fraud.updater import RecordUpdater
from core.config import StackConfig
from core.contracts.compromised import SCHEMA
from detectors import Alert
from detectors.cards.bloom import LABEL, RULE, CompromisedCardParams, SparkBloomFilter, token_key
from detectors.cards.devices import device_judged


@dataclass(frozen=True, slots=True)
class CompromisedWindow:
    terminal_id: str
    window_start: int
    window_end: int
    fpp: float
    bloom: SparkBloomFilter


class CompromisedCards:
    """The filters that may still apply, by (terminal, window start)."""

    def __init__(self, params: CompromisedCardParams) -> None:
        self.params = params
        self.apply_ms = round(params.apply_s * 1000)
        self.lock = threading.Lock()
        self.windows: dict[tuple[str, int], CompromisedWindow] = {}
        self.latest_ms: int | None = None  # the latest purchase time checked, for expiry

    def __len__(self) -> int:
        return len(self.windows)

    def put(self, record: dict[str, Any]) -> None:
        """Keep a `cards.compromised-cards/1` record's filter (ValueError when it is not one;
        one that expired before the latest purchase checked is dropped)."""
        if record.get("schema") != SCHEMA or record.get("item") != "token_key":
            raise ValueError("not a cards.compromised-cards record")
        window = CompromisedWindow(
            str(record["terminal_id"]),
            int(record["window_start"]),
            int(record["window_end"]),
            float(record["fpp"]),
            SparkBloomFilter.from_base64(str(record["filter"])),
        )
        if self.latest_ms is not None and window.window_end + self.apply_ms <= self.latest_ms:
            return
        with self.lock:
            self.windows[(window.terminal_id, window.window_start)] = window

    def check(
        self,
        token: str,
        event_id: str,
        event_time: int,
        channel: str,
        device: str | None = None,
        known: frozenset[str] = frozenset(),
    ) -> Alert | None:
        """`compromised_card` when the purchase's channel is one the filters apply to, its
        `device` one the `devices` gate judges (`known`: the card profile's devices), and a
        filter whose window ended at most `apply_s` before it holds the card.

        >>> from detectors.cards.bloom import SparkBloomFilter
        >>> bloom = SparkBloomFilter.create(1000, 0.01)
        >>> bloom.put_token("tok_" + "ab" * 16)
        >>> cards = CompromisedCards(CompromisedCardParams())
        >>> cards.put({"schema": "cards.compromised-cards/1", "item": "token_key",
        ...     "terminal_id": "t-1", "window_start": 0, "window_end": 600_000, "fpp": 0.01,
        ...     "filter": bloom.to_base64()})
        >>> alert = cards.check("tok_" + "ab" * 16, "tx-1", 700_000, "online", "dv-9")
        >>> alert.evidence["terminal_id"]
        't-1'
        >>> cards.check("tok_" + "ab" * 16, "tx-2", 700_000, "card_present") is None
        True
        >>> gated = CompromisedCards(CompromisedCardParams(devices="new"))
        >>> gated.put({"schema": "cards.compromised-cards/1", "item": "token_key",
        ...     "terminal_id": "t-1", "window_start": 0, "window_end": 600_000, "fpp": 0.01,
        ...     "filter": bloom.to_base64()})
        >>> [gated.check("tok_" + "ab" * 16, "tx-3", 700_000, "online", d, frozenset({"dv-1"}))
        ...  is None for d in ("dv-1", "dv-9")]
        [True, False]
        """
        t = int(event_time)
        if self.latest_ms is None or t > self.latest_ms:
            self.latest_ms = t
            self._expire(t)
        if channel not in self.params.channels or not self.windows:
            return None
        if not device_judged(device, known, self.params.devices):
            return None
        key = token_key(token)
        with self.lock:
            windows = list(self.windows.values())
        hits = [
            w
            for w in windows
            if w.window_end <= t < w.window_end + self.apply_ms and w.bloom.might_contain_long(key)
        ]
        if not hits:
            return None
        first = min(hits, key=lambda w: (w.window_end, w.terminal_id))
        evidence = {
            "terminal_id": first.terminal_id,
            "window_start": first.window_start,
            "window_end": first.window_end,
            "filters_holding": len(hits),
            "fpp": first.fpp,
            **self.params.model_dump(mode="json"),
        }
        key_parts = ("bloom", first.terminal_id, first.window_start, event_id)
        return Alert.make(RULE, token, t, [event_id], evidence, key=key_parts, label=LABEL)

    def _expire(self, now_ms: int) -> None:
        with self.lock:
            gone = [k for k, w in self.windows.items() if w.window_end + self.apply_ms <= now_ms]
            for k in gone:
                del self.windows[k]


class CompromisedUpdater(RecordUpdater):
    """`cards.compromised-cards` -> `CompromisedCards`: the last-use updater's consumer loop,
    from the records appended within `apply_s` before start-up, or within `lookback_s` when
    that is shorter (the endpoint's `rebuild_lookback_s`: 0 for a run or the demo, which then
    stands alone, as its last-use state does)."""

    def __init__(
        self,
        stack: StackConfig,
        topic: str,
        store: CompromisedCards,
        lookback_s: float | None = None,
    ) -> None:
        since = (
            store.params.apply_s if lookback_s is None else min(lookback_s, store.params.apply_s)
        )
        super().__init__(stack, topic, store, "compromised-cards", since)
        self.store: CompromisedCards = store
