"""Where a purchase happens and what it costs: a device for a city and category, an amount.

Shared by everyday spending, trips and fraud, so they all shop from the same merchant table
with the same per-category amount distributions.
"""

from __future__ import annotations

import numpy as np

from scenarios.cards.config import CardsDomain
from scenarios.cards.merchants import Merchants
from scenarios.cards.profiles import CardProfiles
from simulators.distributions import sample_per_group


class Purchases:
    def __init__(self, domain: CardsDomain, cards: CardProfiles, merchants: Merchants):
        self.cards = cards
        self.merchants = merchants
        self._amounts = [c.amount for c in domain.categories]
        w = np.array([c.online_weight for c in domain.categories])
        self._online_cum = np.cumsum(w / w.sum())
        self.mcc_index = {c.mcc: i for i, c in enumerate(domain.categories)}

    def at_pos(
        self, city: np.ndarray, category: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """A POS terminal in `city`, of `category` where the city has one."""
        u = np.asarray(rng.random(city.shape[0]))
        return self.merchants.pos_device(city, category, u)

    def online_categories(self, n: int, rng: np.random.Generator) -> np.ndarray:
        u = rng.random(n)
        idx = np.searchsorted(self._online_cum, u, side="right")
        return np.minimum(idx, self._online_cum.shape[0] - 1).astype(np.int32)

    def online(self, category: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """An online merchant's gateway of `category`."""
        u = np.asarray(rng.random(category.shape[0]))
        return self.merchants.online_device(category, u)

    def amounts(self, ent: np.ndarray, dev: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The device's category's amount distribution, times each card's spend scale."""
        category = self.merchants.category[dev]
        raw = sample_per_group(rng, self._amounts, category) * self.cards.spend_scale[ent]
        return cents(raw)


def cents(amount: np.ndarray) -> np.ndarray:
    """Rounded to cents, at least 0.01 (the endpoint takes amounts > 0)."""
    return np.maximum(np.round(amount, 2), 0.01)
