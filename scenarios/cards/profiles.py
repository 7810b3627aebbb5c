"""Card holders: fake Luhn-valid PANs, their tokens, homes in real cities, and spending habits.

Spending habits are two category mixes per card (card-present and online, Dirichlet around the
category weights), so a card keeps to its own categories in both channels. Everything is drawn
once at set-up, as numpy columns (100,000 cards take well under a second,
most of it the HMAC of each PAN). PANs are random digits after a network prefix with the Luhn
check digit appended, vectorised (`core.pan.make_pans`); a PAN is kept only when the scenario
needs it (POS mode), otherwise only its token and last 4 digits are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.pan import PanTokenizer, make_pans
from scenarios.cards.config import CardsDomain, CardSettings
from scenarios.cards.world import World, border_pairs

NO_CITY = -1
# Relative purchase rate by local solar hour (0-23): quiet nights, busy days.
DIURNAL = np.array(
    [
        *(0.15, 0.1, 0.07, 0.05, 0.05, 0.1, 0.3, 0.6, 0.9, 1.0, 1.0, 1.0),
        *(1.0, 1.0, 0.95, 0.95, 1.0, 1.0, 1.0, 0.9, 0.8, 0.6, 0.4, 0.25),
    ]
)


@dataclass
class CardProfiles:
    """Per-card constants, one array each (index = entity index)."""

    tokens: list[str]
    last4: list[str]
    pans: list[str] | None  # only in POS mode
    home: np.ndarray  # int32 city index into the World
    across: np.ndarray  # int32: the neighbour city across a border, or NO_CITY
    currency: np.ndarray  # object: ISO 4217 of the home country
    mean_gap_ms: np.ndarray  # float64: mean time between purchase attempts (before thinning)
    online_share: np.ndarray  # float64
    spend_scale: np.ndarray  # float64
    pos_cum: np.ndarray  # float32 (n, categories): cumulative mix of card-present purchases
    online_cum: np.ndarray  # float32 (n, categories): cumulative mix of online purchases
    usage: np.ndarray  # float32 (n, categories): share of all the card's purchases
    typical_amount: np.ndarray  # float64: the card's usage-weighted median purchase
    traveller: np.ndarray  # bool

    def __len__(self) -> int:
        return int(self.home.shape[0])

    @classmethod
    def build(
        cls,
        n: int,
        domain: CardsDomain,
        world: World,
        secret: bytes,
        rng: np.random.Generator,
        keep_pans: bool,
    ) -> CardProfiles:
        c = domain.cards
        pans = make_pans(rng, n, c.pan_prefixes, c.pan_length)
        tokenizer = PanTokenizer(secret, domain.token_hex_chars)
        tokens = [tokenizer.token(p) for p in pans]
        last4 = [p[-4:] for p in pans]

        home, across = _homes(n, domain, world, rng)
        rate_per_h = np.maximum(c.tx_per_hour.sample(rng, n), 1e-6)
        thinning = DIURNAL.mean() if c.diurnal else 1.0
        mean_gap_ms = 3.6e6 * thinning / rate_per_h
        online = np.clip(c.online_share.sample(rng, n), 0.0, 1.0)
        scale = np.maximum(c.spend_scale.sample(rng, n), 0.01)
        pos_mix = _mixes(rng, n, [cat.weight for cat in domain.categories], c)
        online_mix = _mixes(rng, n, [cat.online_weight for cat in domain.categories], c)
        usage = pos_mix * (1 - online)[:, None] + online_mix * online[:, None]
        medians = np.array([cat.amount.ppf(0.5) for cat in domain.categories])
        typical = (usage * medians).sum(axis=1) * scale
        traveller = (rng.random(n) < domain.travel.traveller_share) & (across == NO_CITY)
        return cls(
            tokens=tokens,
            last4=last4,
            pans=pans if keep_pans else None,
            home=home,
            across=across,
            currency=world.currency[home],
            mean_gap_ms=mean_gap_ms,
            online_share=online,
            spend_scale=scale,
            pos_cum=np.cumsum(pos_mix, axis=1).astype(np.float32),
            online_cum=np.cumsum(online_mix, axis=1).astype(np.float32),
            usage=usage.astype(np.float32),
            typical_amount=typical,
            traveller=traveller,
        )

    def pos_categories(self, ent: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A category per card-present purchase, from each card's own mix."""
        return _draw(self.pos_cum[ent], rng)

    def online_categories(self, ent: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A category per online purchase, from each card's own online mix."""
        return _draw(self.online_cum[ent], rng)


def _mixes(rng: np.random.Generator, n: int, weights: list[float], c: CardSettings) -> np.ndarray:
    """Per card, a category mix around `weights` (Dirichlet; categories of weight 0 never)."""
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    alpha = c.category_concentration * np.count_nonzero(w) * w
    mix = rng.standard_gamma(np.broadcast_to(alpha, (n, w.shape[0])))
    totals = mix.sum(axis=1, keepdims=True)
    return np.where(totals > 0, mix / np.where(totals > 0, totals, 1.0), w)


def _draw(cum: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    u = np.asarray(rng.random(cum.shape[0], dtype=np.float32))
    return np.minimum((cum < u[:, None]).sum(axis=1), cum.shape[1] - 1).astype(np.int32)


def _homes(
    n: int, domain: CardsDomain, world: World, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Home cities weighted by population; a share of holders in a pair across a border."""
    cities = np.flatnonzero(world.population >= domain.geography.min_population)
    if cities.size == 0:
        raise ValueError("geography.min_population leaves no city")
    p = world.population[cities] / world.population[cities].sum()
    home = cities[rng.choice(cities.size, n, p=p)].astype(np.int32)
    across = np.full(n, NO_CITY, dtype=np.int32)
    b = domain.border
    border = np.flatnonzero(rng.random(n) < b.share)
    if border.size:
        pairs = border_pairs_for(world, b.min_population, b.max_distance_km)
        if pairs.shape[0]:
            weight = world.population[pairs].sum(axis=1).astype(np.float64)
            pick = pairs[rng.choice(pairs.shape[0], border.size, p=weight / weight.sum())]
            side = rng.integers(0, 2, border.size)
            home[border] = pick[np.arange(border.size), side]
            across[border] = pick[np.arange(border.size), 1 - side]
    return home, across


_PAIRS: dict[tuple[int, float], np.ndarray] = {}


def border_pairs_for(world: World, min_population: int, max_km: float) -> np.ndarray:
    """Border pairs among cities of at least `min_population` (computed once per process)."""
    key = (min_population, max_km)
    if key not in _PAIRS:
        candidates = np.flatnonzero(world.population >= min_population)
        _PAIRS[key] = border_pairs(world, candidates, max_km)
    return _PAIRS[key]
