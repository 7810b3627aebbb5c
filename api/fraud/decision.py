"""One decision: the detectors' per-request checks against the card's state, a score, a verdict.

`Decider.decide(request)` returns the response body and the `cards.activity` record to publish
(None for a repeated transaction_id, which gets the stored body and is not published again).

The rules are the detectors' own (`TravelState.check`, `check_velocity`, `SpendingState`
through the profiles, `TerminalState.check` per merchant, the compromised terminals' Bloom
filters through `CompromisedCards`); this module only gathers their evidence, turns fired
rules into a score (`Scoring`) and a decision, and builds the record. The response body is a
pure function of the record (`api.fraud.verdict`), so a restarted endpoint that rebuilt its
state from the topic answers a repeat byte for byte as before.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from api.fraud.models import TransactionRequest
from api.fraud.settings import ApiSettings
from api.fraud.state import CardState, LastUseState, merchant_key
from api.fraud.verdict import response_body
from core.contracts import CARD_ACTIVITY
from core.pan import PanTokenizer, last4
from detectors import Alert, check_velocity
from detectors.cards.travel import Position, pair_distance_km, travel_evidence
from detectors.cards.velocity import (
    VelocityFeatures,
    VelocityParams,
    VelocityState,
    velocity_evidence,
)

if TYPE_CHECKING:
    from api.fraud.compromised import CompromisedCards
    from api.fraud.profiles import ProfileStore

SCHEMA = CARD_ACTIVITY.id
NO_HISTORY = "no_history"
STATE_INCOMPLETE = "state_incomplete"

#: Keys a record must have for the updater to apply it: every `cards.activity/1` field but
#: those the verdict and the last-use state do without.
RECORD_KEYS = tuple(
    f.name
    for f in CARD_ACTIVITY.select(
        exclude=("schema", "event_id", "merchant_category", "terminal_id", "device_id")
    )
)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def score_of(rules: set[str], settings: ApiSettings) -> tuple[float, str]:
    """Score and decision for the set of rules that fired."""
    keep = 1.0
    for rule in sorted(rules):
        keep *= 1.0 - settings.scoring.weights.get(rule, 0.0)
    score = round(1.0 - keep, 6)
    if score >= settings.scoring.decline_at:
        return score, "decline"
    if score >= settings.scoring.review_at:
        return score, "review"
    return score, "approve"


class Decider:
    def __init__(
        self,
        settings: ApiSettings,
        tokenizer: PanTokenizer,
        state: LastUseState,
        clock: Callable[[], int] = wall_clock_ms,
        complete: Callable[[], bool] = lambda: True,
        profiles: ProfileStore | None = None,
        compromised: CompromisedCards | None = None,
    ) -> None:
        self.settings = settings
        self.tokenizer = tokenizer
        self.state = state
        self.clock = clock
        self.complete = complete  # whether the state rebuild from the topic has finished
        self.profiles = profiles  # cardholder profiles for the spending rule
        self.compromised = compromised  # the Bloom filters of compromised terminals' cards

    def decide(self, tx: TransactionRequest) -> tuple[bytes, dict[str, Any] | None]:
        token = self.tokenizer.token(tx.card_number)
        state = self.state
        with state.lock:
            now = self.clock()
            cached = state.verdicts.get(tx.transaction_id, now)
            if cached is not None:
                return cached, None
            record = self._record(tx, token, state.card(token), now)
            body = response_body(record)
            state.apply(record, body)
        return body, record

    def _record(
        self, tx: TransactionRequest, token: str, card: CardState | None, now: int
    ) -> dict[str, Any]:
        alerts: list[Alert] = []
        travel = None
        previous_use = None
        if card is not None:
            previous_use = _previous_use(card)
            travel_alerts = card.travel.check(
                tx.transaction_id, tx.event_time, tx.lat, tx.lon, tx.card_present
            )
            alerts.extend(travel_alerts)
            travel = _travel_evidence(card, tx, travel_alerts, self.settings)
        features, ids = _window_features(
            None if card is None else card.velocity, tx, self.settings.velocity
        )
        params = self.settings.velocity
        alert = check_velocity(token, tx.transaction_id, tx.event_time, features, params, ids)
        if alert is not None:
            alerts.append(alert)
        if self.settings.terminal is not None:
            key = merchant_key(tx.merchant_id, tx.terminal_id, self.settings)
            merchant = self.state.merchant(key)
            if merchant is not None:  # a merchant's first use never crosses (>= 2 cards)
                burst = merchant.check(tx.transaction_id, tx.event_time, token)
                if burst is not None:
                    alerts.append(burst)
        if self.profiles is not None:
            spent = self.profiles.check(
                token,
                tx.transaction_id,
                tx.event_time,
                tx.amount,
                tx.merchant_category,
                self.settings.spending,
                tx.device_id,
            )
            if spent is not None:
                alerts.append(spent)
        if self.compromised is not None:
            known = frozenset() if self.profiles is None else self.profiles.devices(token)
            exposed = self.compromised.check(
                token, tx.transaction_id, tx.event_time, tx.channel, tx.device_id, known
            )
            if exposed is not None:
                alerts.append(exposed)
        velocity = velocity_evidence(features, params)
        score, decision = score_of({a.rule for a in alerts}, self.settings)
        reasons = [NO_HISTORY] if card is None else []
        reasons.extend(dict.fromkeys(a.rule for a in alerts))
        if not self.complete():
            reasons.append(STATE_INCOMPLETE)
        return {
            "schema": SCHEMA,
            "event_id": tx.transaction_id,
            "transaction_id": tx.transaction_id,
            "card_token": token,
            "card_last4": last4(tx.card_number),
            "event_time": tx.event_time,
            "amount": tx.amount,
            "currency": tx.currency,
            "merchant_id": tx.merchant_id,
            "merchant_category": tx.merchant_category,
            "channel": tx.channel,
            "card_present": tx.card_present,
            "lat": tx.lat,
            "lon": tx.lon,
            "country": tx.country,
            "terminal_id": tx.terminal_id,
            "device_id": tx.device_id,
            "decision": decision,
            "score": score,
            "reasons": reasons,
            # Serialized once, embedded as is in both the response body and the published
            # record (the same bytes orjson would write for the dict).
            "evidence": orjson.Fragment(
                orjson.dumps(
                    {
                        "previous_use": previous_use,
                        "travel": travel,
                        "velocity": velocity,
                        "alerts": [
                            {
                                "alert_id": a.alert_id,
                                "rule": a.rule,
                                "label": a.label,
                                "event_ids": list(a.event_ids),
                            }
                            for a in alerts
                        ],
                    }
                )
            ),
            "decided_at": now,
        }


def _previous_use(card: CardState) -> dict[str, Any] | None:
    last = card.last_use
    if last is None:
        return None
    keys = ("transaction_id", "event_time", "channel", "country", "lat", "lon", "decision")
    return {k: last[k] for k in keys}


def _travel_evidence(
    card: CardState, tx: TransactionRequest, alerts: list[Alert], settings: ApiSettings
) -> dict[str, Any] | None:
    """Distance, gap and speed from the located use the rule compared against (the one an
    alert names, else the nearest earlier one in event time, else the nearest later one)."""
    if not tx.card_present or tx.lat is None or tx.lon is None:
        return None
    positions = [p for p in card.travel.positions if p.event_id != tx.transaction_id]
    if not positions:
        return None
    previous: Position | None = None
    if alerts:
        other = next((i for i in alerts[0].event_ids if i != tx.transaction_id), None)
        previous = next((p for p in positions if p.event_id == other), None)
    if previous is None:
        i = bisect.bisect_left(
            positions, (tx.event_time, tx.transaction_id), key=lambda p: (p.event_time, p.event_id)
        )
        previous = positions[i - 1] if i > 0 else positions[i]
    if alerts and previous.event_id in alerts[0].event_ids:
        evidence = alerts[0].evidence  # the rule already measured this pair
    else:
        current = Position(tx.transaction_id, tx.event_time, tx.lat, tx.lon)
        distance = pair_distance_km(previous, current, settings.travel)
        gap_s = abs(tx.event_time - previous.event_time) / 1000.0
        evidence = travel_evidence(distance, gap_s, settings.travel)
    return {
        "previous": {
            "transaction_id": previous.event_id,
            "event_time": previous.event_time,
            "lat": previous.lat,
            "lon": previous.lon,
        },
        **evidence,
        "impossible": bool(alerts),
    }


def _window_features(
    velocity: VelocityState | None, tx: TransactionRequest, params: VelocityParams
) -> tuple[VelocityFeatures, list[str]]:
    """What the velocity window ending at this transaction holds, this one included."""
    state = velocity if velocity is not None else VelocityState("", params)
    return state.features(tx.transaction_id, tx.event_time, tx.amount, tx.merchant_id)
