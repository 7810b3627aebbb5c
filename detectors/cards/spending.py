"""Spending anomaly (account takeover): a large amount in a category unusual for the card.

The rule compares a transaction with the card's own profile *before* it:

    history_count >= min_history  and  amount >= min_amount
    and  amount > amount_multiple * median_amount
    and  category_count < max_category_share * history_count

where `median_amount` is the median of the card's last `history_size` amounts and
`category_count` how often the card was used in this transaction's category. Against an
issuer's profile (`check_profile_spending`), the payer's device can gate the rule too
(`devices`): a takeover is a stranger paying, from a device the holder never used. The predicate
(`spending_fires`) runs on floats (per request) or arrays (vectorised) alike, and on features
from anywhere: `SpendingState` keeps them per card, `spending_alerts` computes them in pandas,
and `spending_feature_alerts` takes them ready-made (e.g. `percentile_approx` in Spark).

Disorder: the profile is a slowly moving baseline. The vectorised form builds it in event-time
order; the stateful form in arrival order (a late transaction is judged against the current
profile, then folded in). The two agree whenever arrival order is event-time order.
Key: the transaction's event id.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pydantic import Field

from detectors.alert import Alert, Evidence, alerts_to_frame
from detectors.cards.devices import DEVICE_GATE_HELP, DeviceGate, device_judged
from detectors.dedup import SeenIds
from detectors.frames import ENTITY, EVENT_ID, EVENT_TIME, Columns, prepare
from detectors.params import Thresholds
from detectors.snapshot import Snapshottable

RULE = "spending_anomaly"
LABEL = "account_takeover"


class SpendingParams(Thresholds):
    """Thresholds of `spending_anomaly`."""

    amount_multiple: float = Field(
        5.0, gt=1, le=1_000, description="Fire above this multiple of the card's median amount."
    )
    max_category_share: float = Field(
        0.05, ge=0, le=1, description="Fire only when the category's share of history is below."
    )
    min_history: int = Field(
        10, ge=1, le=100_000, description="Transactions of history before the rule can fire."
    )
    min_amount: float = Field(200.0, ge=0, description="Never fire below this amount.")
    history_size: int = Field(
        50, ge=1, le=10_000, description="The median is over this many latest amounts."
    )
    devices: DeviceGate = Field("any", description=DEVICE_GATE_HELP)


#: The thresholds the fraud endpoint and the cards job judge against a card's profile
#: with (set on the cards-tuning suite's seeds, see docs/cards.md): a purchase from a
#: device the holder never used, above 150.00 and 3x the typical ticket, in a category under 2%
#: of the card's history.
PROFILE_SPENDING = SpendingParams(
    amount_multiple=3.0, max_category_share=0.02, min_amount=150.0, devices="new"
)


@dataclass(frozen=True, slots=True)
class SpendingFeatures:
    """A card's profile just before a transaction, seen from that transaction's category."""

    history_count: int
    median_amount: float
    category_count: int


def spending_fires(
    amount: Any, median_amount: Any, history_count: Any, category_count: Any, params: SpendingParams
) -> Any:
    """The rule, on floats or numpy arrays alike (a NaN median never fires)."""
    return (
        (history_count >= params.min_history)
        & (amount >= params.min_amount)
        & (amount > params.amount_multiple * median_amount)
        & (category_count < params.max_category_share * history_count)
    )


def spending_evidence(
    amount: float, category: str, features: SpendingFeatures, params: SpendingParams
) -> Evidence:
    return {
        "amount": float(amount),
        "category": category,
        "median_amount": float(features.median_amount),
        "history_count": int(features.history_count),
        "category_count": int(features.category_count),
        "category_share": features.category_count / features.history_count
        if features.history_count
        else None,
        **params.model_dump(),
    }


def check_spending(
    entity_id: str,
    event_id: str,
    event_time: int,
    amount: float,
    category: str,
    features: SpendingFeatures,
    params: SpendingParams,
) -> Alert | None:
    """Per-transaction form on a profile computed anywhere.

    >>> f = SpendingFeatures(history_count=40, median_amount=30.0, category_count=0)
    >>> check_spending("card-1", "tx-41", 1_000, 900.0, "jewelry", f, SpendingParams()).label
    'account_takeover'
    >>> check_spending("card-1", "tx-41", 1_000, 100.0, "jewelry", f, SpendingParams()) is None
    True
    """
    fires = spending_fires(
        amount, features.median_amount, features.history_count, features.category_count, params
    )
    if not fires:
        return None
    evidence = spending_evidence(amount, category, features, params)
    return Alert.make(
        RULE, entity_id, event_time, (event_id,), evidence, key=(event_id,), label=LABEL
    )


#: A cardholder profile as the rule reads it:
#: (history_count, typical_amount, {category: count}, known device ids).
ProfileFeatures = tuple[int, float, Mapping[str, int], frozenset[str]]


def profile_features(data: Mapping[str, Any]) -> ProfileFeatures:
    """(history_count, typical_amount, {category: count}, devices) of a `cards.profile/1`
    record (or a mapping with those keys; `devices` may be missing or null: none known);
    ValueError when it is not one.

    >>> profile_features({"history_count": 40, "typical_amount": 31.5,
    ...                   "category_counts": {"5411": 38}, "devices": ["dv-1"]})
    (40, 31.5, {'5411': 38}, frozenset({'dv-1'}))
    """
    try:
        counts = data["category_counts"]
        if not isinstance(counts, dict):
            raise TypeError("category_counts is not an object")
        devices = data.get("devices") or ()
        if not isinstance(devices, (list, tuple)):
            raise TypeError("devices is not a list")
        return (
            int(data["history_count"]),
            float(data["typical_amount"]),
            {str(k): int(v) for k, v in counts.items()},
            frozenset(str(d) for d in devices),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a card profile: {exc}") from exc


def check_profile_spending(
    entity_id: str,
    event_id: str,
    event_time: int,
    amount: float,
    category: str | None,
    profile: ProfileFeatures,
    params: SpendingParams,
    device: str | None = None,
) -> Alert | None:
    """`check_spending` against an issuer's profile of the card (purchases over its period,
    typical ticket, purchases per MCC, known devices) rather than a history built from the
    stream: the fraud endpoint and the cards job both judge a purchase this way.
    `params.devices` says whether the payer's device counts (a known one is the holder's own).

    >>> profile = (400, 30.0, {"5411": 390, "5732": 1}, frozenset({"dv-1"}))
    >>> check_profile_spending("t", "tx", 0, 900.0, "5732", profile, SpendingParams()).label
    'account_takeover'
    >>> check_profile_spending("t", "tx", 0, 900.0, "5411", profile, SpendingParams()) is None
    True
    >>> new = SpendingParams(devices="new")
    >>> check_profile_spending("t", "tx", 0, 900.0, "5732", profile, new, "dv-2").label
    'account_takeover'
    >>> [check_profile_spending("t", "tx", 0, 900.0, "5732", profile, new, d) for d in
    ...  ("dv-1", None)]
    [None, None]
    """
    history, typical, counts, devices = profile
    if not device_judged(device, devices, params.devices):
        return None
    category = category or ""
    features = SpendingFeatures(int(history), float(typical), int(counts.get(category, 0)))
    return check_spending(
        entity_id, str(event_id), int(event_time), float(amount), category, features, params
    )


FEATURE_COLUMNS = ("amount", "category", "history_count", "median_amount", "category_count")


def spending_feature_alerts(
    df: pd.DataFrame, params: SpendingParams | None = None, columns: Columns = None
) -> pd.DataFrame:
    """Vectorised form on transactions that already carry their profile features.

    Columns: `entity_id`, `event_id`, `event_time`, `amount`, `category`, `history_count`,
    `median_amount`, `category_count` (each describing the profile before the transaction).

    >>> tx = pd.DataFrame({"entity_id": "c1", "event_id": ["t1"], "event_time": [0],
    ...     "amount": [900.0], "category": ["jewelry"], "history_count": [40],
    ...     "median_amount": [31.5], "category_count": [0]})
    >>> spending_feature_alerts(tx)["rule"].tolist()
    ['spending_anomaly']
    """
    p = params or SpendingParams()
    rows = prepare(df, FEATURE_COLUMNS, (), columns)
    fired = spending_fires(
        rows["amount"].to_numpy(float),
        rows["median_amount"].to_numpy(float),
        rows["history_count"].to_numpy(float),
        rows["category_count"].to_numpy(float),
        p,
    )
    alerts = []
    for row in rows.loc[fired].to_dict("records"):
        features = SpendingFeatures(
            int(row["history_count"]), float(row["median_amount"]), int(row["category_count"])
        )
        alert = check_spending(
            str(row[ENTITY]),
            str(row[EVENT_ID]),
            int(row[EVENT_TIME]),
            float(row["amount"]),
            str(row["category"]),
            features,
            p,
        )
        alerts.append(alert)
    return alerts_to_frame(a for a in alerts if a is not None)


def spending_features(
    df: pd.DataFrame, params: SpendingParams | None = None, columns: Columns = None
) -> pd.DataFrame:
    """Adds each transaction's profile features (from the card's earlier transactions).

    Sorts by event time and drops duplicate event ids first.

    >>> tx = pd.DataFrame({"entity_id": "c1", "event_id": ["a", "b", "c"],
    ...     "event_time": [0, 1, 2], "amount": [10.0, 30.0, 99.0], "category": ["x", "x", "y"]})
    >>> spending_features(tx)[["history_count", "median_amount", "category_count"]].values.tolist()
    [[0.0, nan, 0.0], [1.0, 10.0, 1.0], [2.0, 20.0, 0.0]]
    """
    p = params or SpendingParams()
    rows = prepare(df, ["amount", "category"], (), columns)
    rows["category"] = rows["category"].fillna("").astype(str)
    by_card = rows.groupby(ENTITY, sort=False)
    rows["history_count"] = by_card.cumcount()
    rows["category_count"] = rows.groupby([ENTITY, "category"], sort=False).cumcount()
    medians = by_card["amount"].transform(
        lambda a: a.rolling(p.history_size, min_periods=1).median().shift(1)
    )
    rows["median_amount"] = medians.astype(float)
    return rows


def spending_alerts(
    df: pd.DataFrame, params: SpendingParams | None = None, columns: Columns = None
) -> pd.DataFrame:
    """Vectorised form over transactions (`amount`, `category`): features, then the rule.

    >>> tx = pd.DataFrame({"entity_id": "c1", "event_id": [f"t{i:02}" for i in range(11)],
    ...     "event_time": range(11), "amount": [20.0] * 10 + [500.0],
    ...     "category": ["grocery"] * 10 + ["electronics"]})
    >>> spending_alerts(tx)["event_ids"].tolist()
    [['t10']]
    """
    return spending_feature_alerts(spending_features(df, params, columns), params)


class SpendingProfile:
    """A card's profile: how often each category was used, and the latest amounts."""

    __slots__ = ("amounts", "categories", "count")

    def __init__(self, history_size: int) -> None:
        self.count = 0
        self.categories: dict[str, int] = {}
        self.amounts: deque[float] = deque(maxlen=history_size)

    def features(self, category: str) -> SpendingFeatures:
        median = statistics.median(self.amounts) if self.amounts else float("nan")
        return SpendingFeatures(self.count, float(median), self.categories.get(category, 0))

    def add(self, amount: float, category: str) -> None:
        self.count += 1
        self.categories[category] = self.categories.get(category, 0) + 1
        self.amounts.append(float(amount))


class SpendingState(Snapshottable):
    """Stateful per-card form (endpoint and Spark).

    - `check(...)`: the alert this transaction would raise, state unchanged (the endpoint).
    - `add(...)`: fold it into the profile (the last-use updater).
    - `update(...)`: both (Spark); a repeated event id is ignored.

    >>> state = SpendingState("card-1")
    >>> for i in range(10):
    ...     _ = state.update(f"t{i}", i, 20.0, "grocery")
    >>> state.update("t10", 10, 500.0, "electronics")[0].evidence["median_amount"]
    20.0
    """

    __slots__ = ("entity_id", "params", "profile", "seen")

    def __init__(
        self, entity_id: str, params: SpendingParams | None = None, *, max_seen: int = 64
    ) -> None:
        self.entity_id = entity_id
        self.params = params or SpendingParams()
        self.profile = SpendingProfile(self.params.history_size)
        self.seen = SeenIds(max_seen)

    def check(
        self, event_id: str, event_time: int, amount: float, category: str | None
    ) -> Alert | None:
        category = category or ""
        features = self.profile.features(category)
        return check_spending(
            self.entity_id,
            str(event_id),
            int(event_time),
            float(amount),
            category,
            features,
            self.params,
        )

    def add(self, event_id: str, event_time: int, amount: float, category: str | None) -> None:
        if self.seen.add(str(event_id)):
            self.profile.add(float(amount), category or "")

    def update(
        self, event_id: str, event_time: int, amount: float, category: str | None
    ) -> list[Alert]:
        if str(event_id) in self.seen:
            return []
        alert = self.check(event_id, event_time, amount, category)
        self.add(event_id, event_time, amount, category)
        return [] if alert is None else [alert]

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able snapshot (store it in Spark state, restore with `restore`)."""
        return {
            "count": self.profile.count,
            "categories": dict(self.profile.categories),
            "amounts": list(self.profile.amounts),
            "seen": self.seen.to_list(),
        }

    def restore(self, data: Mapping[str, Any]) -> None:
        self.profile.count = int(data["count"])
        self.profile.categories = {str(k): int(v) for k, v in data["categories"].items()}
        self.profile.amounts.clear()
        self.profile.amounts.extend(float(a) for a in data["amounts"])
        self.seen = SeenIds(self.seen.capacity, data["seen"])


def spending_step(
    entity_id: str,
    profile: list[Any],
    event_id: str,
    event_time: int,
    amount: float,
    category: str | None,
    params: SpendingParams,
) -> Alert | None:
    """`SpendingState.update` on a compact profile `[count, {category: count}, [amounts]]`
    (changed in place; the amounts hold the latest `history_size`): the alert of this
    transaction against the profile before it, then the transaction folded in. The median is
    only computed where the rule could fire (enough history, a large enough amount).

    >>> profile: list[Any] = [0, {}, []]
    >>> [spending_step("card-1", profile, f"t{i}", i, 20.0, "grocery", SpendingParams())
    ...  for i in range(10)] == [None] * 10
    True
    >>> spending_step("card-1", profile, "t10", 10, 500.0, "electronics", SpendingParams()).label
    'account_takeover'
    >>> profile[0], profile[1], len(profile[2])
    (11, {'grocery': 10, 'electronics': 1}, 11)
    """
    category = category or ""
    count, categories, amounts = profile
    alert = None
    if count >= params.min_history and amount >= params.min_amount and amounts:
        features = SpendingFeatures(
            count, float(statistics.median(amounts)), categories.get(category, 0)
        )
        alert = check_spending(
            entity_id, str(event_id), int(event_time), float(amount), category, features, params
        )
    profile[0] = count + 1
    categories[category] = categories.get(category, 0) + 1
    amounts.append(float(amount))
    if len(amounts) > params.history_size:
        del amounts[: len(amounts) - params.history_size]
    return alert
