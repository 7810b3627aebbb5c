"""Compromised terminal: many distinct cards at one merchant in one window.

A skimmed or compromised terminal shows up as a burst of distinct cards at one merchant. Spark
computes `approx_count_distinct(card)` per merchant over `window()` natively; this module only
thresholds it:

    distinct_cards >= min_distinct_cards

The entity is the merchant. Key: the window bounds and first event id (`window_key`).
On sliding windows given `prior_distinct_cards` (the window's cards before its last slide), a
window fires only where that does not (`first_crossing`): once per burst.
`TerminalState` is the per-request step form (the fraud endpoint): the window ending at the
merchant's latest use, updated per use in O(1) amortized, firing at a burst's first crossing.
`terminal_window_features` computes the same aggregates in pandas (a batch oracle).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from pydantic import Field

from detectors.alert import Alert, alerts_to_frame
from detectors.features import (
    closing_windows,
    first_crossing,
    ids_of,
    optional_value,
    prepare_windows,
    window_key,
    window_rows,
    with_prior,
)
from detectors.frames import ENTITY, EVENT_ID, EVENT_TIME, Columns, prepare
from detectors.params import Thresholds
from detectors.snapshot import Snapshottable

RULE = "compromised_terminal"
LABEL = "compromised_terminal"


class TerminalParams(Thresholds):
    """Thresholds of `compromised_terminal`. The defaults are the fraud endpoint's and the
    cards job's, set once here (tuned on the cards-tuning suite, docs/cards.md)."""

    window_s: float = Field(600.0, gt=0, le=7 * 86_400, description="Window length, seconds.")
    min_distinct_cards: int = Field(
        10,
        ge=2,
        le=10_000_000,
        description="Distinct cards at one merchant in a window to fire. 10: set on the "
        "cards-tuning suite, where 20 reached 0.397 of the incidents (10: 0.932, incident "
        "precision 0.907).",
    )


def terminal_fires(distinct_cards: Any, params: TerminalParams) -> Any:
    """The rule, on ints or numpy arrays alike."""
    return distinct_cards >= params.min_distinct_cards


def check_terminal_window(
    merchant_id: str,
    window_start: int,
    window_end: int,
    distinct_cards: int,
    params: TerminalParams,
    tx_count: int | None = None,
    event_ids: Sequence[str] = (),
    event_time: int | None = None,
) -> Alert | None:
    """Per-window form on aggregates computed elsewhere.

    >>> check_terminal_window("m-7", 0, 600_000, 25, TerminalParams()).evidence["distinct_cards"]
    25
    >>> check_terminal_window("m-7", 0, 600_000, 9, TerminalParams()) is None
    True
    """
    if not terminal_fires(distinct_cards, params):
        return None
    evidence = {
        "distinct_cards": int(distinct_cards),
        "tx_count": None if tx_count is None else int(tx_count),
        "window_start": int(window_start),
        "window_end": int(window_end),
        **params.model_dump(),
    }
    time = int(window_end) - 1 if event_time is None else int(event_time)
    key = window_key(window_start, window_end, event_ids)
    return Alert.make(RULE, merchant_id, time, event_ids, evidence, key=key, label=LABEL)


def terminal_window_alerts(
    windows: pd.DataFrame, params: TerminalParams | None = None, columns: Columns = None
) -> pd.DataFrame:
    """`check_terminal_window` over a frame of window aggregates.

    Columns: `entity_id` (the merchant), `window_start`, `window_end`, `distinct_cards`;
    optional `tx_count`, `last_event_time`, `event_ids`, `prior_distinct_cards` (sliding
    windows: see the module docstring).

    >>> windows = pd.DataFrame({"entity_id": ["m1", "m2"], "window_start": [0, 0],
    ...     "window_end": [600_000, 600_000], "distinct_cards": [45, 3]})
    >>> terminal_window_alerts(windows)["entity_id"].tolist()
    ['m1']
    """
    p = params or TerminalParams()
    optional = ("tx_count", "last_event_time", "event_ids", "prior_distinct_cards")
    rows = prepare_windows(windows, ["distinct_cards"], optional, columns)
    fired = terminal_fires(rows["distinct_cards"].to_numpy(), p)
    if "prior_distinct_cards" in rows.columns:
        fired = first_crossing(fired, terminal_fires(rows["prior_distinct_cards"].to_numpy(), p))
    alerts = []
    for row in rows.loc[fired].to_dict("records"):
        alert = check_terminal_window(
            str(row[ENTITY]),
            int(row["window_start"]),
            int(row["window_end"]),
            int(row["distinct_cards"]),
            p,
            optional_value(row, "tx_count"),
            ids_of(optional_value(row, "event_ids")),
            optional_value(row, "last_event_time"),
        )
        alerts.append(alert)
    return alerts_to_frame(a for a in alerts if a is not None)


def terminal_window_features(
    df: pd.DataFrame,
    params: TerminalParams | None = None,
    columns: Columns = None,
    slide_ms: int | None = None,
) -> pd.DataFrame:
    """Window aggregates per merchant in pandas (exact distinct counts), over windows of
    `params.window_s` sliding by `slide_ms` (unset: tumbling; sliding adds
    `prior_distinct_cards`).

    Input: transactions with `entity_id` = the merchant and a `card_id` column.

    >>> tx = pd.DataFrame({"entity_id": "m1", "event_id": ["a", "b", "c"],
    ...     "event_time": [0, 1, 2], "card_id": ["x", "y", "x"]})
    >>> terminal_window_features(tx)[["distinct_cards", "tx_count"]].values.tolist()
    [[2, 3]]
    """
    p = params or TerminalParams()
    window_ms = round(p.window_s * 1000)
    rows = window_rows(prepare(df, ["card_id"], (), columns), window_ms, slide_ms)
    keys = [ENTITY, "window_start", "window_end"]
    out = (
        rows.groupby(keys, sort=True)
        .agg(
            distinct_cards=("card_id", "nunique"),
            tx_count=(EVENT_ID, "size"),
            last_event_time=(EVENT_TIME, "max"),
            event_ids=(EVENT_ID, lambda ids: sorted(ids)),
        )
        .reset_index()
    )
    if slide_ms is None or slide_ms >= window_ms:
        return out
    prior = rows[rows["prior"]].groupby(keys).agg(prior_distinct_cards=("card_id", "nunique"))
    return with_prior(out, prior, keys)


#: One released use at a merchant in its compact ring: event_time, event_id, card.
RingUse = tuple[int, str, str]


def terminal_closing_alerts(
    merchant_id: str,
    ring: Sequence[RingUse],
    after_ms: int | None,
    until_ms: int,
    params: TerminalParams,
    slide_ms: int | None = None,
) -> list[Alert]:
    """The per-window form (`terminal_window_alerts` on `terminal_window_features`, exact
    distinct cards) over the windows a watermark moving from `after_ms` to `until_ms` closes
    (`closing_windows`), from a merchant's ring of uses sorted by (event_time, event_id).

    >>> ring = [(i * 10_000, f"u{i:02}", f"card-{i}") for i in range(25)]
    >>> [len(a.event_ids) for a in terminal_closing_alerts("m1", ring, None, 10**7,
    ...     TerminalParams(), 60_000)]
    [12]
    """
    window_ms = max(1, round(params.window_s * 1000))
    slide = window_ms if slide_ms is None else min(slide_ms, window_ms)
    if len(ring) < params.min_distinct_cards:
        return []
    times = [use[0] for use in ring]
    alerts = []
    for start, end, lo, hi, prior in closing_windows(times, after_ms, until_ms, window_ms, slide):
        if hi - lo < params.min_distinct_cards:
            continue
        distinct = len({use[2] for use in ring[lo:hi]})
        if not terminal_fires(distinct, params):
            continue
        if prior > lo and terminal_fires(len({use[2] for use in ring[lo:prior]}), params):
            continue
        ids = sorted(use[1] for use in ring[lo:hi])
        alert = check_terminal_window(
            merchant_id, start, end, distinct, params, hi - lo, ids, max(times[lo:hi])
        )
        if alert is not None:
            alerts.append(alert)
    return alerts


#: One use held by `TerminalState`: event_time, event_id, card.
Use = tuple[int, str, str]


class TerminalState(Snapshottable):
    """Step form per merchant (the fraud endpoint, per request): the window
    `(latest - window_s, latest]` ending at the merchant's latest event time, kept as a ring of
    uses sorted by event time and a use count per card (distinct cards = cards counted).

    - `check(...)`: the alert this use raises, state unchanged. It fires when the window with
      the use holds at least `min_distinct_cards` cards while the merchant is not already in a
      burst: once per burst, at its first crossing.
    - `add(...)`: remember the use. A burst lasts until a whole window has passed since the
      window last held `min_distinct_cards` cards, so a count hovering around the threshold
      does not alert again; the next crossing after that is a new burst (on other uses).
    - `update(...)`: both.

    A use at or before `latest - window_s` (later than the window) is not counted and never
    fires; a repeated event id is ignored (one still in the window by its id, an evicted one by
    being that late; only one dropped by the cap could count twice). Work per use is O(1)
    amortized: it is inserted once (by bisection, near the end unless late) and evicted once,
    and `check` scans only the uses its own time pushes out of the window, which the following
    `add` drops. Memory: the uses inside the window, at most `max_uses` (oldest dropped first:
    a window holding more saturates there), and nothing after them.

    >>> state = TerminalState("m-1", TerminalParams(min_distinct_cards=3))
    >>> [state.update(f"u{i}", i * 1_000, f"card-{i % 4}") is not None for i in range(6)]
    [False, False, True, False, False, False]
    """

    __slots__ = ("burst_ms", "counts", "entity_id", "ids", "latest", "max_uses", "params", "uses")

    def __init__(
        self,
        entity_id: str,
        params: TerminalParams | None = None,
        *,
        max_uses: int = 4096,
    ) -> None:
        self.entity_id = entity_id
        self.params = params or TerminalParams()
        self.max_uses = max(max_uses, self.params.min_distinct_cards)
        self.uses: list[Use] = []  # sorted by (event_time, event_id)
        self.counts: dict[str, int] = {}  # card -> its uses in `uses`
        self.ids: set[str] = set()  # the event ids in `uses`
        self.latest: int | None = None  # the latest event time counted
        self.burst_ms: int | None = None  # when the window last held a burst (event time)

    @property
    def window_ms(self) -> int:
        return max(1, round(self.params.window_s * 1000))

    def distinct_cards(self) -> int:
        """Distinct cards in the window now."""
        return len(self.counts)

    def __len__(self) -> int:
        return len(self.uses)

    def check(self, event_id: str, event_time: int, card: str) -> Alert | None:
        """The alert this use raises given the stored ones; the state is unchanged."""
        t = int(event_time)
        if event_id in self.ids or self._late(t) or self.in_burst(t):
            return None
        evicted = self._evicted(t)
        gone: dict[str, int] = {}
        for use in self.uses[:evicted]:
            gone[use[2]] = gone.get(use[2], 0) + 1
        counts = self.counts
        left = len(counts) - sum(1 for c, n in gone.items() if n == counts[c])
        distinct = left + (counts.get(card, 0) == gone.get(card, 0))
        if not terminal_fires(distinct, self.params):
            return None
        window = [*self.uses[evicted:], (t, str(event_id), card)]
        end = max(t, self.latest if self.latest is not None else t) + 1
        ids = sorted(use[1] for use in window)
        return check_terminal_window(
            self.entity_id, end - self.window_ms, end, distinct, self.params, len(window), ids, t
        )

    def add(self, event_id: str, event_time: int, card: str) -> None:
        """Remember a use (a repeated event id, or one later than the window, is ignored)."""
        t = int(event_time)
        if event_id in self.ids or self._late(t):
            return
        evicted = self._evicted(t)
        counts = self.counts
        for use in self.uses[:evicted]:
            self.ids.discard(use[1])
            n = counts[use[2]] - 1
            if n:
                counts[use[2]] = n
            else:
                del counts[use[2]]
        del self.uses[:evicted]
        use = (t, str(event_id), card)
        self.ids.add(use[1])
        if not self.uses or use >= self.uses[-1]:
            self.uses.append(use)
        else:
            bisect.insort(self.uses, use)
        counts[card] = counts.get(card, 0) + 1
        self.latest = t if self.latest is None else max(self.latest, t)
        if terminal_fires(len(counts), self.params):
            self.burst_ms = self.latest

    def update(self, event_id: str, event_time: int, card: str) -> Alert | None:
        """`check`, then `add`."""
        alert = self.check(event_id, event_time, card)
        self.add(event_id, event_time, card)
        return alert

    def in_burst(self, time_ms: int) -> bool:
        """Whether a use at `time_ms` falls in a burst that has alerted."""
        latest = time_ms if self.latest is None else max(self.latest, time_ms)
        return self.burst_ms is not None and latest - self.burst_ms < self.window_ms

    def idle_since(self, time_ms: int) -> bool:
        """Whether every use held, and any burst, is a whole window before `time_ms` (the
        state can be dropped: a new one judges the next use the same)."""
        return self.latest is None or self.latest <= time_ms - self.window_ms

    def _late(self, t: int) -> bool:
        return self.latest is not None and t <= self.latest - self.window_ms

    def _evicted(self, t: int) -> int:
        """How many of the oldest uses a use at `t` pushes out (of the window, or the cap)."""
        latest = t if self.latest is None else max(self.latest, t)
        uses = self.uses
        by_time = 0
        cut = latest - self.window_ms
        while by_time < len(uses) and uses[by_time][0] <= cut:
            by_time += 1
        return max(by_time, len(uses) + 1 - self.max_uses)

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able snapshot (restore with `restore`)."""
        return {
            "uses": [list(u) for u in self.uses],
            "latest": self.latest,
            "burst_ms": self.burst_ms,
        }

    def restore(self, data: Mapping[str, Any]) -> None:
        self.uses = [(int(t), str(i), str(c)) for t, i, c in data["uses"]]
        self.ids = {use[1] for use in self.uses}
        self.counts = {}
        for use in self.uses:
            self.counts[use[2]] = self.counts.get(use[2], 0) + 1
        self.latest = None if data["latest"] is None else int(data["latest"])
        self.burst_ms = None if data["burst_ms"] is None else int(data["burst_ms"])
