"""Velocity (card testing): too many transactions on one card in a short window.

Card testers run many small transactions to learn whether stolen numbers work. The rule fires
when the window ending at a transaction holds

    tx_count >= min_count  and  small_count >= min_small_count
    and  distinct_merchants >= min_distinct_merchants

where `small_count` counts amounts below `small_amount`. Three forms share that predicate
(`velocity_fires`):

- **per event** (`VelocityState`, `velocity_alerts`): the window `(t - window_s, t]` ending at
  each transaction's own event time. `VelocityState` keeps a bounded, event-time-sorted ring of
  the card's recent transactions; the endpoint calls `check` per request. The count only grows
  when events are added, so a late event re-checks the later events whose windows it joins:
  `update` then returns their alerts too, and the stateful and vectorised forms fire for the
  same events whatever the arrival order. Key: the firing event id.
- **per window** (`check_velocity_window`, `velocity_window_alerts`): aggregates Spark SQL
  computes natively over `window()` (count, sum, small count, approx distinct merchants); only
  the predicate runs in Python. Key: the window bounds and first event id (`window_key`), so
  an update-mode re-emission of a window keeps its id. `velocity_window_features` computes
  the same aggregates in pandas.
  Sliding windows catch a burst that a tumbling boundary would split; given each window's
  features without its last slide too (`prior_*`), a window fires only where those do not,
  so a burst alerts once, at the window that first crosses the threshold, not once per
  overlapping window (see `first_crossing`).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pydantic import Field, model_validator

from detectors.alert import Alert, Evidence, alerts_to_frame
from detectors.dedup import SeenIds
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
from detectors.frames import ENTITY, EVENT_ID, EVENT_TIME, Columns, per_entity, prepare
from detectors.params import Thresholds, dumped
from detectors.snapshot import Snapshottable
from detectors.windows import window_bounds, window_distinct, window_sum

RULE = "velocity"
LABEL = "card_testing"


class VelocityParams(Thresholds):
    """Thresholds of `velocity`. The defaults are the fraud endpoint's and the cards
    job's, set once here (tuned on the cards-tuning suite, docs/cards.md)."""

    window_s: float = Field(600.0, gt=0, le=7 * 86_400, description="Window length, seconds.")
    min_count: int = Field(
        3,
        ge=1,
        le=100_000,
        description="Transactions in the window to fire. 3 (3 small amounts in 10 minutes): set "
        "on the cards-tuning suite, where 5 missed the short tests (recall 0.838, worst seed "
        "0.632; 3: 0.952 / 0.909, incident precision 0.968 / 0.900).",
    )
    small_amount: float = Field(
        5.0, ge=0, description="Amounts strictly below this count as small (card testing)."
    )
    min_small_count: int = Field(3, ge=0, le=100_000, description="Small ones needed to fire.")
    min_distinct_merchants: int = Field(
        1, ge=1, le=100_000, description="Distinct merchants needed to fire (1: any)."
    )

    @property
    def window_ms(self) -> int:
        """The window in whole milliseconds."""
        return max(1, round(self.window_s * 1000))

    @model_validator(mode="after")
    def _reachable(self) -> VelocityParams:
        if max(self.min_small_count, self.min_distinct_merchants) > self.min_count:
            raise ValueError("min_small_count and min_distinct_merchants must be <= min_count")
        return self


@dataclass(frozen=True, slots=True)
class VelocityFeatures:
    """What a window holds."""

    tx_count: int
    small_count: int
    amount_sum: float | None = None
    distinct_merchants: int | None = None


def velocity_fires(
    tx_count: Any, small_count: Any, distinct_merchants: Any, params: VelocityParams
) -> Any:
    """The rule, on ints or numpy arrays alike."""
    return (
        (tx_count >= params.min_count)
        & (small_count >= params.min_small_count)
        & (distinct_merchants >= params.min_distinct_merchants)
    )


def velocity_evidence(features: VelocityFeatures, params: VelocityParams) -> Evidence:
    amount_sum = features.amount_sum
    merchants = features.distinct_merchants
    return {
        "tx_count": int(features.tx_count),
        "small_count": int(features.small_count),
        "amount_sum": None if amount_sum is None else round(float(amount_sum), 6),
        "distinct_merchants": None if merchants is None else int(merchants),
        **dumped(params),
    }


def _fires(features: VelocityFeatures, params: VelocityParams) -> bool:
    merchants = features.distinct_merchants
    if merchants is None:
        if params.min_distinct_merchants > 1:
            raise ValueError("min_distinct_merchants > 1 needs the distinct_merchants feature")
        merchants = params.min_distinct_merchants
    return bool(velocity_fires(features.tx_count, features.small_count, merchants, params))


def check_velocity(
    entity_id: str,
    event_id: str,
    event_time: int,
    features: VelocityFeatures,
    params: VelocityParams,
    event_ids: Sequence[str] = (),
) -> Alert | None:
    """Per-event form on the features of the window ending at this event.

    >>> f = VelocityFeatures(tx_count=6, small_count=5, amount_sum=12.0, distinct_merchants=1)
    >>> check_velocity("card-1", "tx-6", 1_000, f, VelocityParams()).rule
    'velocity'
    """
    if not _fires(features, params):
        return None
    ids = tuple(event_ids) or (event_id,)
    evidence = velocity_evidence(features, params)
    return Alert.make(RULE, entity_id, event_time, ids, evidence, key=(event_id,), label=LABEL)


def check_velocity_window(
    entity_id: str,
    window_start: int,
    window_end: int,
    features: VelocityFeatures,
    params: VelocityParams,
    event_ids: Sequence[str] = (),
    event_time: int | None = None,
) -> Alert | None:
    """Per-window form on aggregates computed elsewhere (e.g. Spark SQL over `window()`).

    `event_time` defaults to the window's last millisecond; pass `max(event_time)` if known.

    >>> f = VelocityFeatures(tx_count=2, small_count=2)
    >>> check_velocity_window("card-1", 0, 600_000, f, VelocityParams()) is None
    True
    """
    if not _fires(features, params):
        return None
    evidence = {**velocity_evidence(features, params), "window_start": int(window_start)}
    evidence["window_end"] = int(window_end)
    time = int(window_end) - 1 if event_time is None else int(event_time)
    key = window_key(window_start, window_end, event_ids)
    return Alert.make(RULE, entity_id, time, event_ids, evidence, key=key, label=LABEL)


WINDOW_FEATURES = ("tx_count", "small_count")
#: A sliding window's features over its events before its last slide.
PRIOR_FEATURES = ("prior_tx_count", "prior_small_count", "prior_distinct_merchants")
OPTIONAL_WINDOW_FEATURES = (
    "amount_sum",
    "distinct_merchants",
    "last_event_time",
    "event_ids",
    *PRIOR_FEATURES,
)


def velocity_window_alerts(
    windows: pd.DataFrame, params: VelocityParams | None = None, columns: Columns = None
) -> pd.DataFrame:
    """`check_velocity_window` over a frame of window aggregates.

    Columns: `entity_id`, `window_start`, `window_end`, `tx_count`, `small_count`; optional
    `amount_sum`, `distinct_merchants`, `last_event_time`, `event_ids` (a list) and, for
    sliding windows, `prior_tx_count`, `prior_small_count` (and `prior_distinct_merchants`):
    the same features over the window's events before its last slide. With them a window
    fires only where its prior features do not (`first_crossing`).

    >>> windows = pd.DataFrame({"entity_id": ["c1", "c2"], "window_start": [0, 0],
    ...     "window_end": [600_000, 600_000], "tx_count": [7, 2], "small_count": [6, 2]})
    >>> velocity_window_alerts(windows)["entity_id"].tolist()
    ['c1']
    >>> velocity_window_alerts(windows.assign(prior_tx_count=7, prior_small_count=6)).empty
    True
    """
    p = params or VelocityParams()
    rows = prepare_windows(windows, WINDOW_FEATURES, OPTIONAL_WINDOW_FEATURES, columns)
    fired = _window_fires(rows, "", p)
    if "prior_tx_count" in rows.columns:
        fired = first_crossing(fired, _window_fires(rows, "prior_", p))
    alerts = []
    for row in rows.loc[fired].to_dict("records"):
        features = VelocityFeatures(
            int(row["tx_count"]),
            int(row["small_count"]),
            optional_value(row, "amount_sum"),
            optional_value(row, "distinct_merchants"),
        )
        alert = check_velocity_window(
            str(row[ENTITY]),
            int(row["window_start"]),
            int(row["window_end"]),
            features,
            p,
            ids_of(optional_value(row, "event_ids")),
            optional_value(row, "last_event_time"),
        )
        alerts.append(alert)
    return alerts_to_frame(a for a in alerts if a is not None)


def _window_fires(rows: pd.DataFrame, prefix: str, p: VelocityParams) -> np.ndarray:
    merchants = rows.get(f"{prefix}distinct_merchants", pd.Series(np.nan, index=rows.index))
    if p.min_distinct_merchants > 1 and merchants.isna().any():
        raise ValueError(f"min_distinct_merchants > 1 needs the {prefix}distinct_merchants column")
    filled = merchants.fillna(p.min_distinct_merchants).to_numpy()
    counts = rows[f"{prefix}tx_count"].to_numpy()
    return np.asarray(velocity_fires(counts, rows[f"{prefix}small_count"].to_numpy(), filled, p))


def velocity_window_features(
    df: pd.DataFrame,
    params: VelocityParams | None = None,
    columns: Columns = None,
    slide_ms: int | None = None,
) -> pd.DataFrame:
    """Window aggregates in pandas: what Spark's `groupBy(window(...))` computes, over windows
    of `params.window_s` sliding by `slide_ms` (unset: tumbling).

    Input: transactions with `amount` and optional `merchant_id`. Output: one row per entity
    and window with the columns `velocity_window_alerts` takes (`event_ids` sorted; the
    `prior_*` features when sliding).

    >>> tx = pd.DataFrame({"entity_id": "c1", "event_id": ["a", "b"], "event_time": [1, 700_000],
    ...     "amount": [1.0, 50.0]})
    >>> velocity_window_features(tx)[["window_start", "tx_count", "small_count"]].values.tolist()
    [[0, 1, 1], [600000, 1, 0]]
    """
    p = params or VelocityParams()
    rows = prepare(df, ["amount"], ["merchant_id"], columns)
    rows["small"] = rows["amount"] < p.small_amount
    rows["merchant_id"] = rows.get("merchant_id", pd.Series("", index=rows.index)).fillna("")
    rows = window_rows(rows, p.window_ms, slide_ms)
    keys = [ENTITY, "window_start", "window_end"]
    out = (
        rows.groupby(keys, sort=True)
        .agg(
            tx_count=(EVENT_ID, "size"),
            small_count=("small", "sum"),
            amount_sum=("amount", "sum"),
            distinct_merchants=("merchant_id", "nunique"),
            last_event_time=(EVENT_TIME, "max"),
            event_ids=(EVENT_ID, lambda ids: sorted(ids)),
        )
        .reset_index()
    )
    if slide_ms is None or slide_ms >= p.window_ms:
        return out
    prior = (
        rows[rows["prior"]]
        .groupby(keys)
        .agg(
            prior_tx_count=(EVENT_ID, "size"),
            prior_small_count=("small", "sum"),
            prior_distinct_merchants=("merchant_id", "nunique"),
        )
    )
    return with_prior(out, prior, keys)


def velocity_alerts(
    df: pd.DataFrame, params: VelocityParams | None = None, columns: Columns = None
) -> pd.DataFrame:
    """Per-event vectorised form over transactions (`amount`, optional `merchant_id`).

    Sorts by event time and drops duplicate event ids first.

    >>> tx = pd.DataFrame({"entity_id": "c1", "event_id": [f"t{i}" for i in range(5)],
    ...     "event_time": [i * 60_000 for i in range(5)], "amount": [1.0] * 5})
    >>> velocity_alerts(tx)["event_ids"].map(len).tolist()
    [3, 4, 5]
    """
    p = params or VelocityParams()
    rows = prepare(df, ["amount"], ["merchant_id"], columns)

    def rule_for(entity_id: str, tx: pd.DataFrame) -> list[Alert]:
        times = tx[EVENT_TIME].to_numpy(np.int64)
        amounts = tx["amount"].to_numpy(float)
        left, right = window_bounds(times, p.window_ms)
        small = window_sum(amounts < p.small_amount, left, right).round().astype(np.int64)
        merchants = _merchant_codes(tx)
        distinct = window_distinct(merchants, left, right)
        total = window_sum(amounts, left, right)
        fired = np.flatnonzero(velocity_fires(right - left, small, distinct, p))
        ids = tx[EVENT_ID].tolist()
        return [
            _event_alert(
                entity_id,
                ids[i],
                int(times[i]),
                VelocityFeatures(
                    int(right[i] - left[i]), int(small[i]), float(total[i]), int(distinct[i])
                ),
                p,
                ids[left[i] : right[i]],
            )
            for i in fired
        ]

    return per_entity(rows, rule_for)


def _merchant_codes(tx: pd.DataFrame) -> np.ndarray:
    if "merchant_id" not in tx.columns:
        return np.zeros(len(tx), dtype=np.int64)
    return tx["merchant_id"].fillna("").astype(str).to_numpy()


def _event_alert(
    entity_id: str,
    event_id: str,
    event_time: int,
    features: VelocityFeatures,
    params: VelocityParams,
    window_ids: Sequence[str],
) -> Alert:
    evidence = velocity_evidence(features, params)
    return Alert.make(
        RULE, entity_id, event_time, window_ids, evidence, key=(event_id,), label=LABEL
    )


Tx = tuple[int, str, float, str]  # event_time, event_id, amount, merchant_id


def _features(window: list[Tx], params: VelocityParams) -> VelocityFeatures:
    small = sum(1 for t in window if t[2] < params.small_amount)
    return VelocityFeatures(
        len(window), small, sum(t[2] for t in window), len({t[3] for t in window})
    )


class VelocityState(Snapshottable):
    """Stateful per-card form: a bounded ring of recent transactions in event-time order.

    - `check(...)`: the alert this transaction would raise, state unchanged (the endpoint).
    - `add(...)`: remember it (the last-use updater).
    - `update(...)`: both, plus re-checks of later transactions a late one lands before
      (Spark). A repeated event id is ignored.

    Keeps the `max_events` latest transactions within `retention_s` (default: three windows)
    of the latest one; a window holding more saturates there, and an event later than the
    retention is judged on the transactions still held. Also remembers the last `max_seen`
    event ids (stored transactions are always recognised as duplicates).

    >>> state = VelocityState("card-1")
    >>> [len(state.update(f"t{i}", i * 1_000, 1.0)) for i in range(6)]
    [0, 0, 1, 1, 1, 1]
    """

    __slots__ = (
        "entity_id",
        "fired",
        "max_events",
        "params",
        "retention_ms",
        "seen",
        "times",
        "tx",
    )

    def __init__(
        self,
        entity_id: str,
        params: VelocityParams | None = None,
        *,
        max_events: int = 256,
        retention_s: float | None = None,
        max_seen: int = 64,
    ) -> None:
        self.entity_id = entity_id
        self.params = params or VelocityParams()
        self.max_events = max(max_events, self.params.min_count)
        retention = 3 * self.params.window_s if retention_s is None else retention_s
        self.retention_ms = max(self.params.window_ms, round(retention * 1000))
        self.tx: list[Tx] = []  # sorted by (event_time, event_id)
        self.times: list[int] = []  # the event times of `tx`, for C-speed bisection
        self.fired: set[str] = set()
        self.seen = SeenIds(max_seen)

    def check(
        self, event_id: str, event_time: int, amount: float, merchant_id: str | None = None
    ) -> Alert | None:
        """The alert for this transaction given the stored ones; the state is unchanged."""
        new = (int(event_time), str(event_id), float(amount), merchant_id or "")
        return self._judge(new, self._window_with(new))

    def features(
        self, event_id: str, event_time: int, amount: float, merchant_id: str | None = None
    ) -> tuple[VelocityFeatures, list[str]]:
        """The window ending at this transaction (it included): its features and event ids,
        in event-time order; the state is unchanged. The endpoint reports them as evidence
        whether or not the rule fires."""
        window = self._window_with(
            (int(event_time), str(event_id), float(amount), merchant_id or "")
        )
        return _features(window, self.params), [t[1] for t in sorted(window)]

    def _window_with(self, new: Tx) -> list[Tx]:
        window = self._window(new[0])
        if self._known(new):
            window = [t for t in window if t[1] != new[1]]
        window.append(new)
        return window

    def add(
        self, event_id: str, event_time: int, amount: float, merchant_id: str | None = None
    ) -> None:
        """Remember a transaction (a repeated event id is ignored)."""
        new = (int(event_time), str(event_id), float(amount), merchant_id or "")
        if not self._known(new):
            self.seen.add(new[1])
            self._insert(new)

    def update(
        self, event_id: str, event_time: int, amount: float, merchant_id: str | None = None
    ) -> list[Alert]:
        """Add the transaction; the alerts of it and of later ones whose window it joins."""
        new = (int(event_time), str(event_id), float(amount), merchant_id or "")
        if self._known(new):
            return []
        self.seen.add(new[1])
        self._insert(new)
        horizon = new[0] + self.params.window_ms
        alerts = []
        for tx in self.tx[bisect.bisect_left(self.tx, new) :]:
            if tx[0] >= horizon:
                break
            if tx[1] in self.fired:
                continue
            alert = self._judge(tx, self._window(tx[0]))
            if alert is not None:
                self.fired.add(tx[1])
                alerts.append(alert)
        return alerts

    def _known(self, tx: Tx) -> bool:
        if tx[1] in self.seen:
            return True
        i = bisect.bisect_left(self.tx, tx[:2])
        return i < len(self.tx) and self.tx[i][1] == tx[1]

    def _window(self, time_ms: int) -> list[Tx]:
        lo = bisect.bisect_right(self.times, time_ms - self.params.window_ms)
        return self.tx[lo : bisect.bisect_right(self.times, time_ms)]

    def _judge(self, tx: Tx, window: list[Tx]) -> Alert | None:
        features = _features(window, self.params)
        if not _fires(features, self.params):
            return None
        ids = [t[1] for t in sorted(window)]
        return _event_alert(self.entity_id, tx[1], tx[0], features, self.params, ids)

    def _insert(self, tx: Tx) -> None:
        i = bisect.bisect_left(self.tx, tx)
        self.tx.insert(i, tx)
        self.times.insert(i, tx[0])
        oldest = bisect.bisect_right(self.times, self.times[-1] - self.retention_ms)
        excess = max(len(self.tx) - self.max_events, oldest)
        if excess > 0:
            for old in self.tx[:excess]:
                self.fired.discard(old[1])
            del self.tx[:excess], self.times[:excess]

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able snapshot (store it in Spark state, restore with `restore`)."""
        return {
            "tx": [list(t) for t in self.tx],
            "fired": sorted(self.fired),
            "seen": self.seen.to_list(),
        }

    def restore(self, data: Mapping[str, Any]) -> None:
        self.tx = [(int(t), str(i), float(a), str(m)) for t, i, a, m in data["tx"]]
        self.times = [t[0] for t in self.tx]
        self.fired = {str(i) for i in data["fired"]}
        self.seen = SeenIds(self.seen.capacity, data["seen"])


#: One released transaction in a card's compact ring: event_time, event_id, amount, merchant.
RingTx = tuple[int, str, float, str]


def velocity_closing_alerts(
    entity_id: str,
    ring: Sequence[RingTx],
    after_ms: int | None,
    until_ms: int,
    params: VelocityParams,
    slide_ms: int | None = None,
) -> list[Alert]:
    """The per-window form (`velocity_window_alerts` on `velocity_window_features`, exact
    distinct merchants) over the windows a watermark moving from `after_ms` to `until_ms`
    closes (`closing_windows`), from a card's ring of transactions sorted by (event_time,
    event_id): the same alerts, ids and all, without a row per window. On sliding windows a
    window fires only where it does without its last slide not (`first_crossing`).

    >>> ring = [(i * 60_000, f"t{i}", 1.0, "m") for i in range(6)]
    >>> [a.event_ids for a in velocity_closing_alerts("c1", ring, None, 10**7, VelocityParams(),
    ...     60_000)]
    [('t0', 't1', 't2')]
    """
    window_ms = params.window_ms
    slide = window_ms if slide_ms is None else min(slide_ms, window_ms)
    if len(ring) < params.min_count:
        return []
    times = [tx[0] for tx in ring]
    alerts = []
    for start, end, lo, hi, prior in closing_windows(times, after_ms, until_ms, window_ms, slide):
        if hi - lo < params.min_count:
            continue
        window = ring[lo:hi]
        features = _features(list(window), params)
        if not _fires(features, params):
            continue
        if prior > lo and _fires(_features(list(ring[lo:prior]), params), params):
            continue
        ids = sorted(tx[1] for tx in window)
        alert = check_velocity_window(
            entity_id, start, end, features, params, ids, max(times[lo:hi])
        )
        if alert is not None:
            alerts.append(alert)
    return alerts
