"""Every card rule in one stateful operator: per-card travel, spending and velocity, and
per-merchant compromised terminal, in compact state kept per bucket of entities.

Why buckets: in PySpark every state `get`, `update`, `exists` and timer call is a round trip
to the JVM's state server, and a card makes about one transaction per batch, so per-card
state costs two or more round trips per transaction. Here the grouping key is a bucket
(`hash(kind, entity) mod state_buckets`): each bucket holds its entities' records, so a batch
costs one `get` and one `update` per bucket, plus a timer move (delete + register) only when
the bucket's earliest due time changes, whatever the number of cards in it.

Compact state (`BucketState`, pickled): per entity a small record, itself pickled, so only the
entities a batch touches are decoded:
- a card: its not-yet-released uses, the latest 8 positions (`travel_step`), the spending
  profile `[count, {category: count}, latest amounts]` built from the stream
  (`spending_step`), the issuer's profile of the card when profiles are fed (below), and a
  ring of its released transactions inside the velocity window (`velocity_closing_alerts`);
- a merchant: its not-yet-released uses and a ring of released uses inside the terminal window
  (`terminal_closing_alerts`).

Uses are buffered as they arrive and released when the watermark passes them (or the call's
`release_point`, a batch sooner), in (event_time, event_id) order, so the alerts are those of
the event-time-sorted stream (the batch forms):
travel and spending are fed each released use; the velocity and terminal windows (sliding by
`rule_slide`, starts aligned to the epoch as Spark's `window()`) are judged once the watermark
passes their end, the first crossing of each burst only: the same ids as the window forms on
Spark's aggregates, with exact distinct counts.

Cardholder profiles (`CardRuleParams.profiles`): rows of kind "p" carry a `cards.profile/1`
record's features (`profile`: JSON of history_count, typical_amount, category_counts), grouped
in the bucket of the card's own rows. They are master data, not events: applied on arrival
(never buffered behind the watermark, never late), the newer `event_time` winning, and kept in
the card's record. The spending rule then judges each released purchase against that profile
with `check_profile_spending`, as the fraud endpoint does; a card without a profile is not
judged, and the stream-built history is not used. A profile that arrives after one of its
card's purchases was released cannot help that purchase: it was judged (not at all) when the
watermark passed it. A card's profile is forgotten with its record, `ttl_ms` after the later
of its latest use and the profile's `event_time`.

`CardBucketProcessor` runs `BucketState` in `transformWithStateInPandas` (time mode EventTime)
with one `ValueState` (`state BINARY`) and at most one event-time timer per bucket, at the
earliest time any of its entities needs the watermark (a buffered use, or the end of a window
that could fire).
"""

from __future__ import annotations

import bisect
import json
import math
import pickle
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql.streaming.state import GroupState
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from detectors import ALERT_COLUMNS, Alert, alerts_to_frame
from detectors.cards.spending import (
    ProfileFeatures,
    SpendingParams,
    check_profile_spending,
    spending_step,
)
from detectors.cards.spending import profile_features as profile_features_of
from detectors.cards.terminal import TerminalParams, terminal_closing_alerts
from detectors.cards.travel import Position, TravelParams, position, travel_step
from detectors.cards.velocity import VelocityParams, velocity_closing_alerts
from detectors.features import next_window_end
from pipeline.group_state import STATE_DDL, GroupStateFn
from pipeline.late_drops import with_drops

#: Input columns of the processor (beyond the grouping key `bucket`): `kind` is "c" for a
#: card's row (`other` = the merchant), "m" for a merchant's (`other` = the card), "p" for a
#: card's profile (`profile` = its features as JSON; null in the other kinds).
INPUT_COLUMNS = (
    "kind",
    "entity",
    "event_id",
    "event_time",
    "lat",
    "lon",
    "card_present",
    "amount",
    "category",
    "other",
    "device",
    "profile",
)
CARD, MERCHANT, PROFILE = "c", "m", "p"
VERSION = 1

# A card's record: [buffer, released_until, latest_ms, positions, profile, ring, evaluated,
#                   issuer_profile]; issuer_profile: None or (features, event_time)
# A merchant's:    [buffer, released_until, latest_ms, ring, evaluated]
BUFFER, RELEASED, LATEST = 0, 1, 2
ISSUER = 7


@dataclass(frozen=True)
class CardRuleParams:
    """The enabled rules' thresholds (None: the rule is off) and the window slide."""

    travel: TravelParams | None = None
    spending: SpendingParams | None = None
    velocity: VelocityParams | None = None
    terminal: TerminalParams | None = None
    slide_ms: int | None = None
    ttl_ms: int | None = None
    max_buffered: int = 10_000
    #: The query's watermark delay: a call may release up to its own newest use minus this
    #: (`BucketState.release_point`); None: only up to Spark's watermark.
    delay_ms: int | None = None
    #: Judge spending against the cards' issuer profiles (rows of kind "p"), not the stream.
    profiles: bool = False


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else number


def _flag(value: Any) -> bool | None:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return bool(value)


def _text(value: Any) -> str | None:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


class BucketState:
    """The records of one bucket's cards and merchants (see the module docstring).

    >>> params = CardRuleParams(travel=TravelParams())
    >>> bucket = BucketState(params)
    >>> bucket.push("c", "card-1", "ny", 1_800_000, 40.7128, -74.0060, True, 80.0, "food", "m1")
    True
    >>> bucket.push("c", "card-1", "paris", 0, 48.8566, 2.3522, True, 20.0, "food", "m2")
    True
    >>> bucket.advance(0), bucket.timer()
    ([], 1800000)
    >>> [a.event_ids for a in BucketState.from_bytes(bucket.to_bytes(), params).advance(1_800_000)]
    [('paris', 'ny')]
    """

    __slots__ = (
        "due",
        "entities",
        "late_dropped",
        "latest",
        "newest_ms",
        "open",
        "params",
        "timer_ms",
    )

    def __init__(self, params: CardRuleParams) -> None:
        self.params = params
        self.entities: dict[str, bytes] = {}  # "<kind>:<entity>" -> its pickled record
        self.latest: dict[str, int] = {}  # "<kind>:<entity>" -> its latest event time
        self.due: dict[str, int] = {}  # entities that need the watermark to reach a time
        self.timer_ms: int | None = None  # the bucket's registered event-time timer
        self.late_dropped = 0
        self.open: dict[str, list[Any]] = {}  # records decoded in this call
        self.newest_ms: int | None = None  # the newest use pushed in this call

    # -- state --------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        for name, record in self.open.items():
            self.entities[name] = pickle.dumps(record, pickle.HIGHEST_PROTOCOL)
        self.open.clear()
        return pickle.dumps(
            (VERSION, self.entities, self.latest, self.due, self.timer_ms, self.late_dropped),
            pickle.HIGHEST_PROTOCOL,
        )

    @classmethod
    def from_bytes(cls, data: bytes | None, params: CardRuleParams) -> BucketState:
        bucket = cls(params)
        if data:
            version, *fields = pickle.loads(data)
            if version != VERSION:
                raise ValueError(f"cards state version {version}, expected {VERSION}")
            bucket.entities, bucket.latest, bucket.due, bucket.timer_ms, bucket.late_dropped = (
                fields
            )
        return bucket

    def _record(self, name: str) -> list[Any]:
        record = self.open.get(name)
        if record is None:
            blob = self.entities.get(name)
            if blob is not None:
                record = pickle.loads(blob)
                if name.startswith(CARD) and len(record) == ISSUER:  # from before profiles
                    record.append(None)
            elif name.startswith(CARD):
                record = [[], None, None, [], [0, {}, []], [], None, None]
            else:
                record = [[], None, None, [], None]
            self.open[name] = record
        return record

    # -- input --------------------------------------------------------------------------------

    def push(
        self,
        kind: str,
        entity: str,
        event_id: str,
        event_time: int,
        lat: Any,
        lon: Any,
        card_present: Any,
        amount: Any,
        category: Any,
        other: Any,
        device: Any = None,
        profile: Any = None,
    ) -> bool:
        """Buffer a use until the watermark passes it; False when it is already too late (at
        or before the point this entity has released up to). A profile row (kind "p") is
        applied at once."""
        if kind == PROFILE:
            return self.put_profile(str(entity), int(event_time), profile)
        name = f"{kind}:{entity}"
        record = self._record(name)
        time_ms = int(event_time)
        if record[RELEASED] is not None and time_ms <= record[RELEASED]:
            self.late_dropped += 1
            return False
        if kind == CARD:
            use: tuple[Any, ...] = (
                time_ms,
                str(event_id),
                _number(lat),
                _number(lon),
                _flag(card_present),
                _number(amount),
                _text(category),
                _text(other) or "",
                _text(device),
            )
        else:
            use = (time_ms, str(event_id), _text(other) or "")
        record[BUFFER].append(use)
        if self.newest_ms is None or time_ms > self.newest_ms:
            self.newest_ms = time_ms
        latest = record[LATEST]
        record[LATEST] = time_ms if latest is None else max(latest, time_ms)
        self.latest[name] = record[LATEST]
        self.due[name] = min(self.due.get(name, time_ms), time_ms)
        return True

    def put_profile(self, card: str, event_time: int, profile: Any) -> bool:
        """Keep a card's issuer profile (`profile`: JSON or a mapping of history_count,
        typical_amount, category_counts) unless the card holds a newer one; True when kept.
        ValueError when it is not a profile (the job dead-letters those before they get here).
        """
        features = profile_features(profile)
        name = f"{CARD}:{card}"
        record = self._record(name)
        held = record[ISSUER]
        if held is not None and event_time < held[1]:
            return False
        record[ISSUER] = (features, event_time)
        latest = record[LATEST]
        record[LATEST] = event_time if latest is None else max(latest, event_time)
        self.latest[name] = record[LATEST]
        return True

    def push_frame(self, frame: pd.DataFrame) -> None:
        """`push` every row of an input frame (`INPUT_COLUMNS`)."""
        columns = [frame[c].tolist() for c in INPUT_COLUMNS]
        for row in zip(*columns, strict=True):
            self.push(*row)

    # -- the watermark ------------------------------------------------------------------------

    def release_point(self, watermark_ms: int) -> int:
        """How far this call may release: Spark's watermark, or the newest use pushed in this
        call minus the watermark delay (`params.delay_ms`) when that is later.

        Spark's watermark in a batch is the one the previous batch ended with, so a use waits
        one batch more than it must: the newest use of this batch already sets the watermark
        the next batch will have, and no use older than that (minus the delay) can still come
        in within the delay. Releasing at it judges the same uses, in the same order, a batch
        sooner; a use arriving later that is older than what its entity released is later
        than the delay allows, and is dropped and counted as late, as Spark would.

        >>> bucket = BucketState(CardRuleParams(delay_ms=120_000))
        >>> bucket.push("c", "card-1", "a", 500_000, None, None, True, 10.0, "food", "m1")
        True
        >>> bucket.release_point(0), bucket.release_point(400_000)
        (380000, 400000)
        """
        delay = self.params.delay_ms
        if delay is None or self.newest_ms is None:
            return watermark_ms
        return max(watermark_ms, self.newest_ms - delay)

    def advance(self, watermark_ms: int) -> list[Alert]:
        """Release every use at or before the watermark, judge the windows it closes, and
        forget entities `ttl_ms` past their latest use; the alerts."""
        ready = [name for name, due in self.due.items() if due <= watermark_ms]
        alerts: list[Alert] = []
        for name in ready:
            del self.due[name]
            record = self._record(name)
            entity = name[2:]
            if name.startswith(CARD):
                alerts.extend(self._card(entity, record, watermark_ms))
            else:
                alerts.extend(self._merchant(entity, record, watermark_ms))
            due = self._next_due(name, record, watermark_ms)
            if due is not None:
                self.due[name] = due
        self._forget(watermark_ms)
        return alerts

    def _release(self, record: list[Any], watermark_ms: int) -> list[tuple[Any, ...]]:
        """The entity's buffered uses up to the watermark, in order; the entity then takes no
        use at or before the watermark (its windows up to it are judged)."""
        buffer = record[BUFFER]
        held = record[RELEASED]
        record[RELEASED] = watermark_ms if held is None else max(held, watermark_ms)
        if not buffer:
            return []
        buffer.sort(key=lambda use: (use[0], use[1]))
        cut = bisect.bisect_right(buffer, watermark_ms, key=lambda use: use[0])
        cut = max(cut, len(buffer) - self.params.max_buffered)
        released, record[BUFFER] = buffer[:cut], buffer[cut:]
        if released:
            record[RELEASED] = max(record[RELEASED], released[-1][0])
        return released

    def _card(self, card: str, record: list[Any], watermark_ms: int) -> list[Alert]:
        p = self.params
        alerts: list[Alert] = []
        positions = [Position(*stored) for stored in record[3]]
        profile, ring, issuer = record[4], record[5], record[ISSUER]
        features = None if issuer is None else _with_devices(issuer[0])
        # `*device`: the payer's device id; empty for a use buffered before devices
        for (
            time_ms,
            event_id,
            lat,
            lon,
            present,
            amount,
            category,
            merchant,
            *device,
        ) in self._release(record, watermark_ms):
            if p.travel is not None:
                here = position(event_id, time_ms, lat, lon, present)
                alerts.extend(travel_step(card, positions, here, p.travel))
            if p.spending is not None and amount is not None:
                if not p.profiles:
                    alert = spending_step(
                        card, profile, event_id, time_ms, amount, category, p.spending
                    )
                elif features is not None:
                    alert = check_profile_spending(
                        card,
                        event_id,
                        time_ms,
                        amount,
                        category,
                        features,
                        p.spending,
                        device[0] if device else None,
                    )
                else:
                    alert = None
                if alert is not None:
                    alerts.append(alert)
            if p.velocity is not None and amount is not None:
                bisect.insort(ring, (time_ms, event_id, amount, merchant))
        record[3] = [tuple(stored) for stored in positions]
        if p.velocity is not None:
            alerts.extend(
                velocity_closing_alerts(card, ring, record[6], watermark_ms, p.velocity, p.slide_ms)
            )
            record[6] = watermark_ms
            _prune(ring, watermark_ms - p.velocity.window_ms)
        return alerts

    def _merchant(self, merchant: str, record: list[Any], watermark_ms: int) -> list[Alert]:
        p = self.params
        if p.terminal is None:
            record[BUFFER].clear()
            return []
        ring = record[3]
        for use in self._release(record, watermark_ms):
            bisect.insort(ring, use)
        alerts = terminal_closing_alerts(
            merchant, ring, record[4], watermark_ms, p.terminal, p.slide_ms
        )
        record[4] = watermark_ms
        _prune(ring, watermark_ms - _terminal_window_ms(p.terminal))
        return alerts

    def _next_due(self, name: str, record: list[Any], watermark_ms: int) -> int | None:
        """When this entity next needs the watermark: its earliest buffered use, or the end of
        the next window that could fire (enough uses in its ring)."""
        p = self.params
        wanted = [use[0] for use in record[BUFFER][:1]]  # sorted by the release
        window: int | None = None
        if name.startswith(CARD):
            ring = record[5]
            if p.velocity is not None and len(ring) >= p.velocity.min_count:
                window = p.velocity.window_ms
        else:
            ring = record[3]
            if p.terminal is not None and len(ring) >= p.terminal.min_distinct_cards:
                window = _terminal_window_ms(p.terminal)
        if window is not None:
            end = next_window_end(ring[-1][0], watermark_ms, window, self._slide(window))
            wanted += [] if end is None else [end]
        return min(wanted) if wanted else None

    def _slide(self, window_ms: int) -> int:
        return window_ms if self.params.slide_ms is None else min(self.params.slide_ms, window_ms)

    def _forget(self, watermark_ms: int) -> None:
        """Entities with nothing pending whose latest use is `ttl_ms` behind the watermark."""
        ttl = self.params.ttl_ms
        if ttl is None:
            return
        old = [
            name
            for name, latest in self.latest.items()
            if latest + ttl <= watermark_ms and name not in self.due
        ]
        for name in old:
            del self.latest[name]
            self.entities.pop(name, None)
            self.open.pop(name, None)

    def timer(self) -> int | None:
        """When the bucket needs the watermark next (its timer), or None."""
        return min(self.due.values()) if self.due else None


def profile_features(profile: Any) -> ProfileFeatures:
    """(history_count, typical_amount, {category: count}) of a profile row's `profile`: JSON
    text or a mapping with those keys; ValueError when it is not one.

    >>> profile_features('{"history_count": 40, "typical_amount": 31.5,'
    ...                  ' "category_counts": {"5411": 38}}')
    (40, 31.5, {'5411': 38}, frozenset())
    """
    try:
        data = json.loads(profile) if isinstance(profile, (str, bytes)) else profile
    except ValueError as exc:
        raise ValueError(f"not a card profile: {exc}") from exc
    if not isinstance(data, Mapping):
        raise ValueError("not a card profile: not an object")
    return profile_features_of(data)


def _with_devices(features: tuple[Any, ...]) -> ProfileFeatures:
    """A kept profile's features; one kept before profiles listed devices knows none."""
    if len(features) == 3:
        return (*features, frozenset())
    return features


def _prune(ring: list[Any], before_ms: int) -> None:
    """Drop the ring's uses at or before `before_ms`: no window still to close holds them."""
    cut = bisect.bisect_right(ring, before_ms, key=lambda use: use[0])
    del ring[:cut]


def _terminal_window_ms(params: TerminalParams) -> int:
    return max(1, round(params.window_s * 1000))


class CardBucketProcessor(StatefulProcessor):
    """`BucketState` per bucket in `transformWithStateInPandas` (see the module docstring).

    State calls per bucket and batch: one `get`, one `update`, and a `deleteTimer` plus a
    `registerTimer` only when the bucket's earliest due time moves.
    """

    def __init__(self, params: CardRuleParams) -> None:
        self.params = params

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState("bucket", STATE_DDL)

    def _load(self) -> BucketState:
        stored = self.state.get()
        return BucketState.from_bytes(None if stored is None else bytes(stored[0]), self.params)

    def _finish(
        self, bucket: BucketState, watermark_ms: int, refused: int = 0
    ) -> Iterator[pd.DataFrame]:
        alerts = bucket.advance(watermark_ms)
        wanted = bucket.timer()
        if wanted != bucket.timer_ms:
            if bucket.timer_ms is not None:
                self.handle.deleteTimer(bucket.timer_ms)
            if wanted is not None:
                self.handle.registerTimer(wanted)
            bucket.timer_ms = wanted
        self.state.update((bucket.to_bytes(),))
        return _emit(alerts, refused)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        bucket = self._load()
        before = bucket.late_dropped
        for frame in rows:
            bucket.push_frame(frame)
        point = bucket.release_point(timerValues.getCurrentWatermarkInMs())
        return self._finish(bucket, point, bucket.late_dropped - before)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        bucket = self._load()
        if bucket.timer_ms == expiredTimerInfo.getExpiryTimeInMs():
            bucket.timer_ms = None  # Spark has removed the timer that fired
        return self._finish(bucket, timerValues.getCurrentWatermarkInMs())

    def close(self) -> None:
        pass


def bucket_rules(params: CardRuleParams) -> GroupStateFn:
    """`BucketState` per bucket for `applyInPandasWithState` (timeout conf EventTimeTimeout):
    the state travels with the bucket's rows in the Arrow batches (no state-server round
    trip at all) and Spark starts no Python worker on the driver at planning (a
    transformWithState operator does, which must connect back within Spark's timeout: on a
    busy machine it does not, and the query fails). The bucket's timeout is its earliest due
    time, set anew at every call."""

    def apply(
        key: Any, frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        stored = state.getOption
        bucket = BucketState.from_bytes(None if stored is None else bytes(stored[0]), params)
        before = bucket.late_dropped
        for frame in frames:
            bucket.push_frame(frame)
        alerts = bucket.advance(bucket.release_point(state.getCurrentWatermarkMs()))
        due = bucket.timer()
        bucket.timer_ms = due
        state.update((bucket.to_bytes(),))
        if due is not None:
            state.setTimeoutTimestamp(due)
        return _emit(alerts, bucket.late_dropped - before)

    return apply


def _emit(alerts: list[Alert], refused: int) -> Iterator[pd.DataFrame]:
    """The alerts as one frame and the uses refused as late in this call as a count row
    (`OUTPUT_DDL`); no frame built when there are neither: most buckets of most batches."""
    if not alerts and not refused:
        return iter([])
    frame = alerts_to_frame(alerts).loc[:, list(ALERT_COLUMNS)] if alerts else None
    return iter(with_drops(frame, refused))
