"""Trips by air: a traveller flies out, stays, flies back; the card goes along.

Each traveller always has one trip planned, as times per card (numpy columns):

    departs_out .. lands_out   flying out (no card-present use)
    lands_out   .. departs_back  at the destination
    departs_back .. lands_back   flying back
    after lands_back             home; the next trip is planned then

A flight takes overhead (airports) + distance / cruise speed. Each trip also brings four uses:
one at the origin shortly before each departure and one at the arrival city shortly after each
landing; the card's first use after a flight is that arrival use (the "landing" time above is
its time), marked as a `real_flight` hard negative: fast, but possible, travel. Airport uses
are in one of several categories (a taxi, transit, a coffee, a meal, a shop, fuel for the
rental car), and short hops with little overhead (`min_overhead_s`) come closest to impossible.
"""

from __future__ import annotations

import numpy as np

from core.geo import haversine_km
from scenarios.cards.config import TravelSettings
from scenarios.cards.profiles import CardProfiles
from scenarios.cards.purchases import Purchases, cents
from scenarios.cards.uses import NOT_HARD, REAL_FLIGHT, Uses
from scenarios.cards.world import World

HOME, FLYING, AWAY = 0, 1, 2
NEVER = np.inf
MIN_HOME_MS = 6 * 3_600_000  # home at least this long between trips
MIN_STAY_MS = 2 * 3_600_000
CHUNK = 2048
LONG_HAUL = 0.03  # destination weight floor, so far cities stay possible


def pick_destinations(
    world: World,
    origins: np.ndarray,
    candidates: np.ndarray,
    min_km: float,
    scale_km: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """A destination per origin among `candidates`, at least `min_km` away, weighted by
    population * (0.03 + exp(-km / scale_km)): mostly regional, some long-haul. Where no
    candidate is that far, the farthest one.

    Weights are computed once per distinct origin city; each draw is one binary search in the
    concatenation of the origins' normalised cumulative weights (row r spans [r, r + 1]).
    """
    distinct, row = np.unique(origins, return_inverse=True)
    row = row.reshape(-1)
    pop = world.population[candidates].astype(np.float64)
    n_cand = candidates.shape[0]
    keys = np.empty((distinct.shape[0], n_cand))
    farthest = np.full(distinct.shape[0], -1, dtype=np.int64)
    for lo in range(0, distinct.shape[0], CHUNK):
        o = distinct[lo : lo + CHUNK]
        km = haversine_km(
            world.lat[o][:, None],
            world.lon[o][:, None],
            world.lat[candidates][None, :],
            world.lon[candidates][None, :],
        )
        weight = np.where(km >= min_km, pop * (LONG_HAUL + np.exp(-km / scale_km)), 0.0)
        cum = np.cumsum(weight, axis=1)
        total = cum[:, -1:]
        none = total[:, 0] <= 0
        farthest[lo : lo + CHUNK][none] = np.argmax(km[none], axis=1)
        norm = np.where(total > 0, cum / np.where(total > 0, total, 1.0), 1.0)
        keys[lo : lo + CHUNK] = norm + np.arange(lo, lo + o.shape[0])[:, None]
    u = rng.random(origins.shape[0])
    flat = np.searchsorted(keys.ravel(), row + u, side="right")
    pick = np.minimum(flat - row * n_cand, n_cand - 1)
    fallback = farthest[row]
    pick = np.where(fallback >= 0, fallback, pick)
    return candidates[pick].astype(np.int32)


class Trips:
    def __init__(
        self,
        cards: CardProfiles,
        world: World,
        destinations: np.ndarray,
        settings: TravelSettings,
        shops: Purchases,
        airport_categories: np.ndarray,
        rng: np.random.Generator,
    ) -> None:
        n = len(cards)
        self.cards, self.world, self.settings = cards, world, settings
        self.destinations = destinations
        self.shops = shops
        self.airport_categories = np.asarray(airport_categories, dtype=np.int32)
        self.rng = rng
        self.departs_out = np.full(n, NEVER)
        self.lands_out = np.full(n, NEVER)
        self.departs_back = np.full(n, NEVER)
        self.lands_back = np.full(n, NEVER)
        self.dest = np.full(n, -1, dtype=np.int32)
        self.travellers = np.flatnonzero(cards.traveller)
        rate = settings.trips_per_day
        self._gap_ms = 86_400_000 / rate if rate > 0 else NEVER
        self.trips = 0

    def start(self, start_ms: int) -> Uses:
        """Plan every traveller's first trip."""
        if not np.isfinite(self._gap_ms):
            return Uses.empty()
        ents = self.travellers
        return self._plan(ents, np.full(ents.shape[0], float(start_ms)), start_ms)

    def step(self, t0_ms: int, t1_ms: int) -> Uses:
        """Plan the next trip of travellers back home before t1."""
        back = np.flatnonzero(self.lands_back < t1_ms)
        if back.size == 0:
            return Uses.empty()
        return self._plan(back, self.lands_back[back] + MIN_HOME_MS, t0_ms)

    def where(self, ent: np.ndarray, t_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(state, city) of each card at each time."""
        flying = ((t_ms >= self.departs_out[ent]) & (t_ms < self.lands_out[ent])) | (
            (t_ms >= self.departs_back[ent]) & (t_ms < self.lands_back[ent])
        )
        away = (t_ms >= self.lands_out[ent]) & (t_ms < self.departs_back[ent])
        state = np.where(flying, FLYING, np.where(away, AWAY, HOME)).astype(np.int8)
        city = np.where(away, self.dest[ent], self.cards.home[ent]).astype(np.int32)
        return state, city

    def home_until(self, ent: np.ndarray, t_ms: float) -> np.ndarray:
        """Whether each card stays home from now until `t_ms`: its planned trip (if any) starts
        later. A trip in progress started earlier, and the next one is planned only once the
        card is back (`step`)."""
        return np.asarray(self.departs_out[ent] > t_ms)

    def _plan(self, ents: np.ndarray, earliest_ms: np.ndarray, not_before_ms: int) -> Uses:
        s, rng, k = self.settings, self.rng, ents.shape[0]
        home = self.cards.home[ents]
        dest = pick_destinations(
            self.world, home, self.destinations, s.min_distance_km, s.distance_scale_km, rng
        )
        km = haversine_km(
            self.world.lat[home], self.world.lon[home], self.world.lat[dest], self.world.lon[dest]
        )
        cruise_ms = km / s.cruise_kmh * 3_600_000
        departs_out = earliest_ms + rng.exponential(self._gap_ms, k)
        least = s.min_overhead_s
        flight_out = np.maximum(s.overhead_s.sample(rng, k), least) * 1000 + cruise_ms
        stay = np.maximum(s.stay_s.sample(rng, k) * 1000, MIN_STAY_MS)
        flight_back = np.maximum(s.overhead_s.sample(rng, k), least) * 1000 + cruise_ms
        airport = np.maximum(s.airport_use_s.sample(rng, (4 * k)), 1.0).reshape(4, k) * 1000
        airport[1:3] = np.minimum(airport[1:3], stay / 3)  # the stay holds both of its uses
        before_out = departs_out - airport[0]
        early = before_out < not_before_ms  # a trip planned to start soon: a use before it
        before_out[early] = not_before_ms + rng.random(int(early.sum())) * (
            departs_out[early] - not_before_ms
        )
        lands_out = departs_out + flight_out + airport[1]  # = the arrival use
        departs_back = lands_out - airport[1] + stay
        before_back = departs_back - airport[2]
        lands_back = departs_back + flight_back + airport[3]
        self.departs_out[ents], self.lands_out[ents] = departs_out, lands_out
        self.departs_back[ents], self.lands_back[ents] = departs_back, lands_back
        self.dest[ents] = dest
        self.trips += k

        cards = np.concatenate([ents] * 4)
        times = np.floor(np.concatenate([before_out, lands_out, before_back, lands_back]))
        cities = np.concatenate([home, dest, dest, home])
        hard = np.repeat([NOT_HARD, REAL_FLIGHT, NOT_HARD, REAL_FLIGHT], k)
        pick = rng.integers(0, self.airport_categories.shape[0], cards.shape[0])
        category = self.airport_categories[pick]
        dev = self.shops.at_pos(cities, category, rng)
        amount = cents(self.shops.amounts(cards, dev, rng))
        return Uses.make(cards, times, dev, amount, hard_negative=hard)
