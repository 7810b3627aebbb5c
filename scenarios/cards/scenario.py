"""Card velocity: card holders shopping at home, online and on trips, with injected fraud.

Set-up, once: card profiles (fake Luhn-valid PANs, their tokens, homes in real cities weighted by
population, spending habits), the merchant table (POS terminals in every city used, online
merchants), trip plans. One SimPy cohort process steps every card per tick, vectorised:

- everyday purchases: a Poisson process per card, thinned at night (local solar time); online
  with the card's online share (no location), else at a terminal of the card's current city;
  in a category from the card's own mix for that channel; amounts from the category's
  distribution;
- trips (`travel`): no card-present use in the air; uses at the destination;
- fraud incidents (`fraud`), labelled in truth with their type and incident id;
- hard negatives, marked in truth (`hard_negative`), which a good detector must not alert on:
  `real_flight` (the first use after landing: fast but possible travel), `border_neighbours`
  (a use across the border of a pair of cities < 30 km apart, e.g. Strasbourg/Kehl), and
  `online_while_travelling` (an online use while away or in the air), `busy_merchant` (a rush
  of many cards at a busy merchant's tills) and `large_purchase` (a holder's own big purchase
  in a category the card seldom uses; `lookalikes`).

Each use carries the payer's own device (`payers`: a phone, a laptop, a browser; none for
plastic), which the issuer's profile lists when it is the holder's.

Transactions pass through devices (POS terminals, online gateways), so the engine's device
clocks (skew) and delivery (delays, store-and-forward outages, duplicates) are the terminals'.

Events (`cards.transaction/1`, keyed by card token) go to `domain.topic`; with
`domain.delivery: http` (POS mode) each is POSTed instead to the fraud endpoint, PAN included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from core.names import STREAM_SALT
from core.pan import pan_secret
from scenarios.cards.config import CARD_FRAUDS, HARD_NEGATIVES, CardsDomain
from scenarios.cards.encoding import SCHEMA, RequestEncoder, TransactionEncoder
from scenarios.cards.fraud import FraudInjector
from scenarios.cards.lookalikes import Lookalikes
from scenarios.cards.merchants import Merchants
from scenarios.cards.payers import PayerDevices
from scenarios.cards.profiles import DIURNAL, CardProfiles
from scenarios.cards.purchases import Purchases
from scenarios.cards.travel import FLYING, HOME, Trips
from scenarios.cards.uses import (
    BORDER_NEIGHBOURS,
    NOT_HARD,
    ONLINE_WHILE_TRAVELLING,
    PlannedUses,
    Uses,
)
from scenarios.cards.world import World
from simulators.encoding import PayloadField
from simulators.entities import EntityTable
from simulators.records import Readings
from simulators.scenario import Scenario
from simulators.seeds import rng_for
from simulators.sinks.base import Records, Sink
from simulators.truth import TruthField

if TYPE_CHECKING:
    from core.config import StackConfig
    from scenarios.catalog import ScenarioConfig

#: Uses on the way to or from an airport: taxi, transit, fast food, restaurant, shop, fuel.
AIRPORT_MCCS = ("4121", "4111", "5814", "5812", "5999", "5541")


def endpoint_urls(domain: CardsDomain, stack: StackConfig) -> list[str]:
    """POS mode's targets: the configured instances' URLs, else `endpoint_url`."""
    if domain.endpoint.urls:
        return list(domain.endpoint.urls)
    return [endpoint_url(domain, stack)]


def endpoint_url(domain: CardsDomain, stack: StackConfig) -> str:
    """POS mode's target: the configured URL, else the stack's API address."""
    if domain.endpoint.url:
        return domain.endpoint.url
    host = stack.api.host
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{stack.api.port}/v1/transactions"


class CardCohort:
    """Every card, stepped together."""

    def __init__(
        self,
        cards: CardProfiles,
        world: World,
        shops: Purchases,
        trips: Trips,
        fraud: FraudInjector,
        lookalikes: Lookalikes,
        domain: CardsDomain,
        start_ms: int,
        rng: np.random.Generator,
    ) -> None:
        self.cards, self.world, self.shops = cards, world, shops
        self.trips, self.fraud, self.lookalikes = trips, fraud, lookalikes
        self.d = domain
        self.rng = rng
        self.next_ms = start_ms + rng.exponential(1.0, len(cards)) * cards.mean_gap_ms
        self.planned = PlannedUses()
        self.planned.add(trips.start(start_ms))

    def readings(self, t0_ms: int, t1_ms: int) -> Readings | None:
        everyday = self._everyday(t0_ms, t1_ms)
        self.planned.add(self.trips.step(t0_ms, t1_ms))
        self.planned.add(self.fraud.step(t0_ms, t1_ms))
        self.planned.add(self.lookalikes.step(t0_ms, t1_ms))
        uses = Uses.concat([everyday, self.planned.pop_before(t1_ms)])
        if not len(uses):
            return None
        uses.payer = self.fraud.payers.assign(uses.ent, uses.dev, uses.payer)
        return uses.readings()

    def _due(self, t1_ms: int) -> tuple[np.ndarray, np.ndarray]:
        ents, times = [], []
        due = np.flatnonzero(self.next_ms < t1_ms)
        while due.size:
            ents.append(due)
            times.append(self.next_ms[due])
            self.next_ms[due] += self.rng.exponential(1.0, due.size) * self.cards.mean_gap_ms[due]
            due = due[self.next_ms[due] < t1_ms]
        if not ents:
            return np.zeros(0, np.int32), np.zeros(0, np.int64)
        return np.concatenate(ents).astype(np.int32), np.floor(np.concatenate(times)).astype(
            np.int64
        )

    def _everyday(self, t0_ms: int, t1_ms: int) -> Uses:
        ent, t = self._due(t1_ms)
        if ent.size == 0:
            return Uses.empty()
        rng, cards = self.rng, self.cards
        n = ent.shape[0]
        state, city = self.trips.where(ent, t)
        online = rng.random(n) < cards.online_share[ent]
        keep = online | (state != FLYING)
        if self.d.cards.diurnal:
            hours = (t / 3_600_000 + self.world.lon[city] / 15.0) % 24
            keep &= rng.random(n) < DIURNAL[hours.astype(np.int64) % 24]
        ent, t, state, city, online = ent[keep], t[keep], state[keep], city[keep], online[keep]
        n = ent.shape[0]
        hard = np.where(online & (state != HOME), ONLINE_WHILE_TRAVELLING, NOT_HARD)
        across = cards.across[ent]
        cross = ~online & (state == HOME) & (across >= 0)
        cross &= rng.random(n) < self.d.border.cross_share
        city = np.where(cross, across, city)
        hard = np.where(cross, BORDER_NEIGHBOURS, hard).astype(np.int32)
        dev = np.empty(n, dtype=np.int32)
        at_pos = np.flatnonzero(~online)
        dev[at_pos] = self.shops.at_pos(city[at_pos], cards.pos_categories(ent[at_pos], rng), rng)
        on = np.flatnonzero(online)
        dev[on] = self.shops.online(cards.online_categories(ent[on], rng), rng)
        amount = self.shops.amounts(ent, dev, rng)
        return Uses.make(ent, t, dev, amount, hard_negative=hard)


class CardsScenario(Scenario):
    schema = SCHEMA
    entity_field = "card_token"
    labels = ("none", *CARD_FRAUDS)
    payload = (
        PayloadField("amount", "float", decimals=2),
        PayloadField("hard_negative", "enum", choices=("", *HARD_NEGATIVES)),
        PayloadField("payer", "int"),
    )
    truth_fields = (TruthField.choices("hard_negative", "hard_negative", (None, *HARD_NEGATIVES)),)

    def __init__(self, config: ScenarioConfig, stack: StackConfig | None = None) -> None:
        from core.config import load_stack

        self.config = config
        d = config.domain
        assert isinstance(d, CardsDomain)
        self.domain = d
        self.stack = stack if stack is not None else load_stack(None)
        self.topic = d.topic
        self.id_prefix = d.id_prefix
        self.world = World.load()
        self.cards = CardProfiles.build(
            config.entities,
            d,
            self.world,
            pan_secret(self.stack),
            rng_for(config.seed, STREAM_SALT["cards"], "cards"),
            keep_pans=d.delivery == "http",
        )
        self.destinations = np.flatnonzero(
            self.world.population >= d.geography.destination_min_population
        )
        if self.destinations.size == 0:
            raise ValueError("geography.destination_min_population leaves no city")
        lived_in = np.concatenate([self.cards.home, self.cards.across[self.cards.across >= 0]])
        self.merchants = Merchants.build(
            d,
            self.world,
            lived_in,
            self.destinations,
            [c.name for c in config.classes],
            rng_for(config.seed, STREAM_SALT["cards"], "merchants"),
        )
        self.payers = PayerDevices(
            config.entities,
            d.cards,
            self.merchants,
            rng_for(config.seed, STREAM_SALT["cards"], "devices"),
        )
        self.entity_ids = self.cards.tokens
        self.devices = EntityTable.build(
            self.merchants.device_ids, config.classes, self.merchants.class_counts
        )
        self.cohort: CardCohort | None = None
        #: POS mode: POST each request (False: the encoded requests go to the sink instead,
        #: for an in-process endpoint, e.g. `evaluate --suite`).
        self.post = True

    def sources(self, table: EntityTable) -> list[CardCohort]:
        config, d = self.config, self.domain
        shops = Purchases(d, self.cards, self.merchants)
        airport = np.array(
            [shops.mcc_index[m] for m in AIRPORT_MCCS if m in shops.mcc_index] or [0], np.int32
        )
        trips = Trips(
            self.cards,
            self.world,
            self.destinations,
            d.travel,
            shops,
            airport,
            rng_for(config.seed, STREAM_SALT["cards"], "travel"),
        )
        fraud = FraudInjector(
            d, self.cards, self.world, self.destinations, shops, trips, self.payers, config.seed
        )
        self.cohort = CardCohort(
            self.cards,
            self.world,
            shops,
            trips,
            fraud,
            Lookalikes(d, fraud, config.seed),
            d,
            config.start_ms,
            rng_for(config.seed, STREAM_SALT["cards"], "everyday"),
        )
        return [self.cohort]

    def encoder(self, id_prefix: str, table: EntityTable) -> TransactionEncoder | RequestEncoder:
        if self.domain.delivery == "http":
            assert self.cards.pans is not None
            return RequestEncoder(
                id_prefix,
                self.cards.pans,
                self.cards.currency,
                self.merchants.request_fragments(),
                self.payers.fragments(),
            )
        return TransactionEncoder(
            id_prefix,
            self.cards.tokens,
            self.cards.last4,
            self.cards.currency,
            self.merchants.event_fragments(),
            self.payers.fragments(),
        )

    def profile_records(self) -> Records:
        """The cardholder profiles (issuer master data) as of the run's start."""
        from scenarios.cards.master_data import profile_records

        return profile_records(
            self.cards,
            self.payers,
            self.domain,
            self.world,
            self.config.start_ms,
            rng_for(self.config.seed, STREAM_SALT["cards"], "profiles"),
        )

    def wrap_sink(self, sink: Sink) -> Sink:
        """Profiles first (`cards.profiles`); POS mode: transactions to the endpoint over HTTP,
        truth to `sink`."""
        if self.domain.profiles.publish:
            from scenarios.cards.master_data import ProfileSink

            sink = ProfileSink(sink, self.profile_records(), self.domain.profiles.topic)
        if self.domain.delivery != "http" or not self.post:
            return sink
        from simulators.sinks.http import HttpEventSink

        e = self.domain.endpoint
        return HttpEventSink(
            sink,
            endpoint_urls(self.domain, self.stack),
            concurrency=e.concurrency,
            timeout_s=e.timeout_s,
            retries=e.retries,
            affinity=e.affinity,
        )
