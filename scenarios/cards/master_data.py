"""Cardholder profiles, as an issuer keeps them: the card's history compressed into its
typical ticket, categories, home region and usual channel (`cards.profile/1`).

Banks judge a purchase against the card's history, which predates any run. Each profile
summarises `history_days` of past purchases drawn from the card's own habits (the same
purchase rate, channel share, category mix and amounts that drive its purchases in the run):
a purchase count, the count per MCC, the median of the latest `recent_purchases` amounts,
and the devices the holder pays from. Profiles are published once, before the run's first
transaction, on the compacted `cards.profiles` topic keyed by card token (`ProfileSink`); a
consumer rebuilds every card's profile by reading it from the beginning. With the JSONL sink
they go to `profiles.jsonl`.

Fraud is not in the history: a takeover's purchase stands out against it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from core.contracts import CARD_PROFILE
from scenarios.cards.config import CardsDomain
from scenarios.cards.payers import PayerDevices
from scenarios.cards.profiles import DIURNAL, CardProfiles
from scenarios.cards.world import World
from simulators.distributions import sample_per_group
from simulators.sinks.base import Records, Sink, SinkReport, Topics

HOURS_PER_DAY = 24.0


def profile_records(
    cards: CardProfiles,
    payers: PayerDevices,
    domain: CardsDomain,
    world: World,
    as_of_ms: int,
    rng: np.random.Generator,
) -> Records:
    """One `cards.profile/1` record per card, keyed by token, stamped `as_of_ms`."""
    p = domain.profiles
    n = len(cards)
    thinning = DIURNAL.mean() if domain.cards.diurnal else 1.0
    per_hour = 3.6e6 * thinning / cards.mean_gap_ms
    counts = rng.poisson(per_hour * HOURS_PER_DAY * p.history_days)
    usage = cards.usage.astype(np.float64)
    usage /= usage.sum(axis=1, keepdims=True)
    by_category = rng.multinomial(counts, usage)
    # the typical ticket: the median of the latest purchases, from the card's own mix
    k = p.recent_purchases
    cum = np.cumsum(usage, axis=1)
    u = rng.random((n, k))
    category = np.minimum((cum[:, None, :] < u[:, :, None]).sum(axis=2), usage.shape[1] - 1)
    dists = [c.amount for c in domain.categories]
    amounts = sample_per_group(rng, dists, category.ravel()).reshape(n, k)
    typical = np.median(amounts * cards.spend_scale[:, None], axis=1)
    mccs = [c.mcc for c in domain.categories]
    keys, values = [], []
    for i in range(n):
        token = cards.tokens[i]
        row = by_category[i]
        record: dict[str, Any] = {
            "schema": CARD_PROFILE.id,
            "event_id": f"profile-{token}",
            "card_token": token,
            "card_last4": cards.last4[i],
            "event_time": as_of_ms,
            "home_country": str(world.country[cards.home[i]]),
            "home_lat": round(float(world.lat[cards.home[i]]), 5),
            "home_lon": round(float(world.lon[cards.home[i]]), 5),
            "currency": str(cards.currency[i]),
            "usual_channel": "online" if cards.online_share[i] > 0.5 else "card_present",
            "online_share": round(float(cards.online_share[i]), 3),
            "typical_amount": round(float(typical[i]), 2),
            "history_count": int(counts[i]),
            "history_days": p.history_days,
            "category_counts": {mccs[j]: int(row[j]) for j in np.flatnonzero(row).tolist()},
            "devices": payers.known(i),
        }
        keys.append(token.encode())
        values.append(orjson.dumps(record))
    return Records(keys=keys, values=values, timestamps=[as_of_ms] * n)


class ProfileSink:
    """Wraps a sink: on `open`, publishes the profiles (Kafka: the compacted profiles topic;
    JSONL: profiles.jsonl in its directory; any other sink: kept in `published`)."""

    def __init__(self, inner: Sink, records: Records, topic: str) -> None:
        self.inner = inner
        self.records = records
        self.topic = topic
        self.published: Records | None = None

    def open(self, topics: Topics) -> None:
        self.inner.open(topics)
        from simulators.sinks.jsonl import JsonlSink
        from simulators.sinks.kafka import KafkaSink

        if isinstance(self.inner, JsonlSink):
            path = self.inner.directory / "profiles.jsonl"
            path.write_bytes(b"".join(v + b"\n" for v in self.records.values))
        elif isinstance(self.inner, KafkaSink):
            publish(self.inner.stack, self.topic, self.records)
        self.published = self.records

    def write(self, events: Records, truth: Records) -> None:
        self.inner.write(events, truth)

    def pending(self) -> int:
        return self.inner.pending()

    def close(self) -> SinkReport:
        return self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def publish(stack: Any, topic: str, records: Records, timeout_s: float = 60.0) -> None:
    """Produce the profiles to `topic`, created compacted when missing."""
    from confluent_kafka import Producer

    from core.kafka import producer_config
    from core.kafka.compacted import ensure_compacted

    ensure_compacted(stack, topic, timeout_s)
    producer = Producer(producer_config(stack))
    for key, value, ts in zip(records.keys, records.values, records.timestamps, strict=True):
        while True:
            try:
                producer.produce(topic, value=value, key=key, timestamp=ts)
                break
            except BufferError:
                producer.poll(0.1)
    left = producer.flush(timeout_s)
    if left:
        raise RuntimeError(f"{left} profiles not delivered to {topic}")
