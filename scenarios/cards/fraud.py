"""Fraud injection: incidents that start at configured rates and label their transactions.

Each type starts incidents as a Poisson process (rate per 1,000 card-hours) and, when one
starts, decides all of its uses at once; they wait in the planned uses until their time. Every
use of an incident carries its label and the incident's id:

- impossible_travel (cloned card): a clone uses the card in a city far from the holder's home
  (card present), while the holder keeps using it at home: one use shortly before the clone's
  first and one shortly after its last (those two are the holder's own, labelled none).
- card_testing: a burst of small amounts seconds apart, mostly online at distinct merchants,
  else at one terminal in the holder's city.
- account_takeover: a few high amounts (a multiple of the card's typical purchase) in the
  configured category the card uses least, mostly online, from the taker's device (in store,
  the card provisioned to the taker's phone wallet), now and then the holder's own.
- compromised_terminal: many distinct cards at one merchant within a window: a POS terminal
  used by cards of holders living in its city, or an online merchant. Then the harvest is
  cashed out (`cash_out`): a share of the exposed cards each make one or a few purchases at
  online merchants (online or card_not_present), from the fraudster's device, hours to days
  after the card's use there. They are the same incident (same label and incident id), so an
  incident's uses are its window at the one merchant, then its cash-out elsewhere; a cash-out
  falling after the end of the run does not happen. Drawn from their own random stream
  (`fraud`, `cash_out`): the other types' draws are those of a run without them.

Cards for travel and testing at a terminal are picked among holders staying home for the
incident, so an incident never looks like another type by accident.
"""

from __future__ import annotations

import numpy as np

from core.names import STREAM_SALT
from scenarios.cards.config import CARD_FRAUDS, CardsDomain
from scenarios.cards.payers import HOLDER, NO_DEVICE, PayerDevices
from scenarios.cards.profiles import CardProfiles
from scenarios.cards.purchases import Purchases, cents
from scenarios.cards.travel import Trips, pick_destinations
from scenarios.cards.uses import Uses
from scenarios.cards.world import World
from simulators.intervals import IdCounter
from simulators.seeds import rng_for

IMPOSSIBLE_TRAVEL, CARD_TESTING, ACCOUNT_TAKEOVER, COMPROMISED_TERMINAL = (
    1 + CARD_FRAUDS.index(kind) for kind in CARD_FRAUDS
)
MIN_TERMINAL_CARDS = 5
HOUR_MS = 3_600_000
_TRIES = 8


def counts(dist: object, rng: np.random.Generator, n: int, low: int = 1) -> np.ndarray:
    """Whole numbers from a config distribution, at least `low`."""
    return np.maximum(np.rint(dist.sample(rng, n)), low).astype(np.int64)  # type: ignore[attr-defined]


class FraudInjector:
    def __init__(
        self,
        domain: CardsDomain,
        cards: CardProfiles,
        world: World,
        destinations: np.ndarray,
        shops: Purchases,
        trips: Trips,
        payers: PayerDevices,
        seed: int,
    ) -> None:
        self.d = domain.fraud
        self.cards, self.world, self.destinations = cards, world, destinations
        self.shops, self.trips, self.payers = shops, trips, payers
        self.ids = IdCounter()
        self.n = len(cards)
        self.rngs = {
            kind: rng_for(seed, STREAM_SALT["cards"], "fraud", kind) for kind in CARD_FRAUDS
        }
        self._cash_out_rng = rng_for(seed, STREAM_SALT["cards"], "fraud", "cash_out")
        cash = [shops.mcc_index[m] for m in self.d.compromised_terminal.cash_out.categories]
        self._cash_out_categories = np.array(cash, dtype=np.int32)
        self.cashed_out = 0  # cash-out uses planned (some may fall after the run)
        self.started = dict.fromkeys(CARD_FRAUDS, 0)
        self._rates = {
            "impossible_travel": self.d.impossible_travel.rate_per_1k_card_hours,
            "card_testing": self.d.card_testing.rate_per_1k_card_hours,
            "account_takeover": self.d.account_takeover.rate_per_1k_card_hours,
            "compromised_terminal": self.d.compromised_terminal.rate_per_1k_card_hours,
        }
        ato = [shops.mcc_index[m] for m in self.d.account_takeover.categories]
        self._ato_categories = np.array(ato, dtype=np.int32)
        # Cards by home city, for terminals their own holders use.
        self._by_home = np.argsort(cards.home, kind="stable")
        homes = cards.home[self._by_home]
        self._home_cities, self._home_starts, self._home_counts = np.unique(
            homes, return_index=True, return_counts=True
        )

    def step(self, t0_ms: int, t1_ms: int) -> Uses:
        """Start this tick's incidents; return all their uses (some for later ticks)."""
        hours = self.n / 1000 * (t1_ms - t0_ms) / HOUR_MS
        parts = []
        for kind in CARD_FRAUDS:
            rng = self.rngs[kind]
            k = int(rng.poisson(self._rates[kind] * hours))
            for _ in range(k):
                start = int(t0_ms + rng.integers(0, max(t1_ms - t0_ms, 1)))
                uses = getattr(self, f"_{kind}")(start, rng)
                if uses is not None:
                    self.started[kind] += 1
                    parts.append(uses)
        return Uses.concat(parts)

    # -- the types -------------------------------------------------------------------------

    def _home_card(self, rng: np.random.Generator, until_ms: float) -> int | None:
        """A card whose holder is home from now until `until_ms`."""
        for _ in range(_TRIES):
            ent = np.array([rng.integers(0, self.n)])
            if self.trips.home_until(ent, until_ms)[0] and self.cards.across[ent[0]] < 0:
                return int(ent[0])
        return None

    def _impossible_travel(self, start: int, rng: np.random.Generator) -> Uses | None:
        s = self.d.impossible_travel
        k = int(counts(s.uses, rng, 1)[0])
        first = start + max(float(s.lead_s.sample(rng, 1)[0]), 60.0) * 1000
        gaps = np.maximum(s.spacing_s.sample(rng, k - 1), 0) * 1000
        clone_ms = first + np.r_[0.0, np.cumsum(gaps)]
        after = clone_ms[-1] + rng.uniform(5, 30) * 60_000
        card = self._home_card(rng, after + HOUR_MS)
        if card is None:
            return None
        home = self.cards.home[card : card + 1]
        min_km = max(float(s.min_distance_km.sample(rng, 1)[0]), 0.0)
        far = pick_destinations(self.world, home, self.destinations, min_km, 1e9, rng)
        incident = int(self.ids.take(1)[0])
        ent = np.full(k + 2, card, dtype=np.int32)
        cities = np.r_[home, np.repeat(far, k), home].astype(np.int32)
        times = np.floor(np.r_[start, clone_ms, after])
        dev = self.shops.at_pos(cities, self.cards.pos_categories(ent, rng), rng)
        amount = self.shops.amounts(ent, dev, rng)
        label = np.r_[0, np.full(k, IMPOSSIBLE_TRAVEL), 0]
        incidents = np.r_[-1, np.full(k, incident), -1]
        payer = np.r_[HOLDER, np.full(k, NO_DEVICE), HOLDER]  # the clone is plastic
        return Uses.make(ent, times, dev, amount, label, incidents, payer=payer)

    def _card_testing(self, start: int, rng: np.random.Generator) -> Uses:
        s = self.d.card_testing
        k = int(counts(s.attempts, rng, 2)[0])
        gaps = np.maximum(s.spacing_s.sample(rng, k - 1), 0) * 1000
        times = np.floor(start + np.r_[0.0, np.cumsum(gaps)])
        online = rng.random() < s.online_share
        card = None if online else self._home_card(rng, float(times[-1]) + HOUR_MS)
        if card is None:
            card = int(rng.integers(0, self.n))
            online = True
        ent = np.full(k, card, dtype=np.int32)
        if online:
            dev = self.shops.online(self.shops.online_categories(k, rng), rng)
        else:
            city = self.cards.home[ent[:1]]
            dev = np.repeat(
                self.shops.at_pos(city, self.cards.pos_categories(ent[:1], rng), rng), k
            )
        amount = cents(np.minimum(s.amount.sample(rng, k), s.max_amount))
        payer = self.payers.strangers(1)[0] if online else NO_DEVICE  # a bot, or a clone
        incident = int(self.ids.take(1)[0])
        return Uses.make(ent, times, dev, amount, CARD_TESTING, incident, payer=payer)

    def _account_takeover(self, start: int, rng: np.random.Generator) -> Uses:
        s = self.d.account_takeover
        k = int(counts(s.uses, rng, 1)[0])
        gaps = np.maximum(s.spacing_s.sample(rng, k - 1), 0) * 1000
        times = np.floor(start + np.r_[0.0, np.cumsum(gaps)])
        online = rng.random(k) < s.online_share
        card = self._home_card(rng, float(times[-1]) + HOUR_MS)
        if card is None:
            card = int(rng.integers(0, self.n))
            online[:] = True
        ent = np.full(k, card, dtype=np.int32)
        usage = self.cards.usage[card]
        category = self._ato_categories[np.argmin(usage[self._ato_categories])]
        cats = np.full(k, category, dtype=np.int32)
        dev = np.where(
            online,
            self.shops.online(cats, rng),
            self.shops.at_pos(self.cards.home[ent], cats, rng),
        )
        multiple = np.maximum(s.amount_multiple.sample(rng, k), 1.0)
        floor = max(float(s.min_amount.sample(rng, 1)[0]), 0.0)
        jitter = rng.uniform(0.0, 0.25 * floor, k)  # never one round floor amount
        amount = cents(np.maximum(multiple * self.cards.typical_amount[card], floor + jitter))
        holder = self.payers.rng.random() < s.holder_device_share
        payer = HOLDER if holder else self.payers.strangers(1)[0]
        incident = int(self.ids.take(1)[0])
        return Uses.make(ent, times, dev, amount, ACCOUNT_TAKEOVER, incident, payer=payer)

    def _compromised_terminal(self, start: int, rng: np.random.Generator) -> Uses | None:
        s = self.d.compromised_terminal
        want = int(counts(s.cards, rng, 2)[0])
        window_ms = max(float(s.window_s.sample(rng, 1)[0]), 1.0) * 1000
        times = np.floor(start + np.sort(rng.uniform(0, window_ms, want)))
        dev: np.ndarray | None = None
        cards: np.ndarray | None = None
        if rng.random() >= s.online_share:
            cards, city = self._local_cards(rng, want, float(times[-1]) + HOUR_MS)
            if cards is not None:
                category = self.cards.pos_categories(cards[:1], rng)
                dev = np.repeat(self.shops.at_pos(np.array([city]), category, rng), cards.size)
        if cards is None or dev is None:
            cards = rng.choice(self.n, min(want, self.n), replace=False).astype(np.int32)
            category = self.shops.online_categories(1, rng)
            dev = np.repeat(self.shops.online(category, rng), cards.size)
        times = times[: cards.size]
        amount = self.shops.amounts(cards, dev, rng)
        incident = int(self.ids.take(1)[0])
        window = Uses.make(cards, times, dev, amount, COMPROMISED_TERMINAL, incident)
        return Uses.concat([window, self._cash_out(cards, times, incident)])

    def _cash_out(self, cards: np.ndarray, exposed_ms: np.ndarray, incident: int) -> Uses:
        """The harvest cashed out: a share of the cards, each one or a few purchases online
        from the fraudster's device, `delay_s` after its use at the compromised merchant."""
        s = self.d.compromised_terminal.cash_out
        rng = self._cash_out_rng
        picked = np.flatnonzero(rng.random(cards.size) < s.share)
        if picked.size == 0:
            return Uses.empty()
        k = counts(s.uses, rng, picked.size)
        delay = np.maximum(s.delay_s.sample(rng, picked.size), 0.0) * 1000
        ent = np.repeat(cards[picked], k)
        first = np.repeat(exposed_ms[picked] + delay, k)
        gaps = np.maximum(s.spacing_s.sample(rng, int(k.sum())), 0.0) * 1000
        # each card's purchases: its first, then the gaps after it (the first gap unused)
        starts = np.repeat(np.cumsum(k) - k, k)
        walked = np.cumsum(gaps)
        offset = walked - walked[starts]
        times = np.floor(first + offset)
        cats = self._cash_out_categories[
            rng.integers(0, self._cash_out_categories.shape[0], ent.size)
        ]
        dev = self.shops.online(cats, rng)
        amount = self.shops.amounts(ent, dev, rng)
        p = self.payers
        thief = p.first_stranger + rng.integers(0, p.n_strangers, picked.size)
        payer = np.repeat(thief, k)  # one device of the fraudster's per card
        self.cashed_out += int(ent.size)
        return Uses.make(ent, times, dev, amount, COMPROMISED_TERMINAL, incident, payer=payer)

    def _local_cards(
        self, rng: np.random.Generator, want: int, until_ms: float
    ) -> tuple[np.ndarray | None, int]:
        """Up to `want` distinct cards of holders home in one city, weighted by holders."""
        counts_ = self._home_counts
        city_pick = int(rng.choice(counts_.shape[0], p=counts_ / counts_.sum()))
        lo = self._home_starts[city_pick]
        members = self._by_home[lo : lo + counts_[city_pick]]
        members = members[self.trips.home_until(members, until_ms)]
        members = members[self.cards.across[members] < 0]
        if members.size < MIN_TERMINAL_CARDS:
            return None, -1
        chosen = rng.choice(members, min(want, members.size), replace=False).astype(np.int32)
        return chosen, int(self._home_cities[city_pick])
