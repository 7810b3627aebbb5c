"""Hard negatives near the fraud rules' boundaries: legitimate activity that looks like fraud.

- busy_merchant: a rush at a busy merchant (a supermarket at lunch, a stadium kiosk, a
  commuter hub): many of its city's cards pay within minutes, spread over its tills. It looks
  like a compromised terminal to a rule that counts distinct cards per merchant.
- large_purchase: a holder's own large purchase (a laptop, a ring, a holiday), mostly in
  person at home, in a category the card seldom uses; some online ones from a device the
  issuer has not seen yet. It looks like an account takeover to a rule that compares amounts
  with the card's typical ticket.

Both start as Poisson processes (rate per 1,000 card-hours), like the fraud incidents, and
their uses are marked in truth (`hard_negative`), labelled `none`. Sizes are drawn from
documented realistic ranges (`HardNegativeSettings`), not cut at any rule's threshold.
"""

from __future__ import annotations

import numpy as np

from core.names import STREAM_SALT
from scenarios.cards.config import CardsDomain
from scenarios.cards.fraud import HOUR_MS, FraudInjector, counts
from scenarios.cards.payers import HOLDER
from scenarios.cards.purchases import cents
from scenarios.cards.uses import BUSY_MERCHANT, LARGE_PURCHASE, Uses
from simulators.seeds import rng_for


class Lookalikes:
    """Starts the hard negatives; shares the fraud injector's card pickers and shops."""

    def __init__(self, domain: CardsDomain, fraud: FraudInjector, seed: int) -> None:
        self.s = domain.hard_negatives
        self.fraud = fraud
        self.cards, self.shops = fraud.cards, fraud.shops
        self.n = len(fraud.cards)
        self.rngs = {
            kind: rng_for(seed, STREAM_SALT["cards"], "hard_negatives", kind)
            for kind in ("busy_merchant", "large_purchase")
        }
        idx = fraud.shops.mcc_index
        self._busy = np.array([idx[m] for m in self.s.busy_merchant.categories], np.int32)
        self._large = np.array([idx[m] for m in self.s.large_purchase.categories], np.int32)
        m = fraud.shops.merchants
        pos = np.arange(m.pos_first, m.pos_first + m.n_pos)
        codes = np.unique(m.merchant_id[pos].astype(str), return_inverse=True)[1].reshape(-1)
        self._pos_merchant = np.full(len(m.device_ids), -1, dtype=np.int64)
        self._pos_merchant[pos] = codes
        order = np.argsort(codes, kind="stable")
        self._tills = pos[order]  # POS devices grouped by merchant
        self._till_start = np.searchsorted(
            codes[order], np.arange(codes.max() + 1 if codes.size else 0)
        )
        self._till_end = np.r_[self._till_start[1:], order.shape[0]]
        self.started = {"busy_merchant": 0, "large_purchase": 0}

    def step(self, t0_ms: int, t1_ms: int) -> Uses:
        hours = self.n / 1000 * (t1_ms - t0_ms) / HOUR_MS
        parts = []
        for kind, rate in (
            ("busy_merchant", self.s.busy_merchant.rate_per_1k_card_hours),
            ("large_purchase", self.s.large_purchase.rate_per_1k_card_hours),
        ):
            rng = self.rngs[kind]
            for _ in range(int(rng.poisson(rate * hours))):
                start = int(t0_ms + rng.integers(0, max(t1_ms - t0_ms, 1)))
                uses = getattr(self, f"_{kind}")(start, rng)
                if uses is not None:
                    self.started[kind] += 1
                    parts.append(uses)
        return Uses.concat(parts)

    def _busy_merchant(self, start: int, rng: np.random.Generator) -> Uses | None:
        s = self.s.busy_merchant
        want = int(counts(s.cards, rng, 2)[0])
        window_ms = max(float(s.window_s.sample(rng, 1)[0]), 1.0) * 1000
        times = np.floor(start + np.sort(rng.uniform(0, window_ms, want)))
        cards, city = self.fraud._local_cards(rng, want, float(times[-1]) + HOUR_MS)
        if cards is None:
            return None
        category = self._busy[rng.integers(0, self._busy.shape[0], 1)]
        first = self.shops.at_pos(np.array([city]), category, rng)[0]
        merchant = self._pos_merchant[first]
        tills = self._tills[self._till_start[merchant] : self._till_end[merchant]]
        dev = tills[rng.integers(0, tills.shape[0], cards.size)].astype(np.int32)
        amount = self.shops.amounts(cards, dev, rng)
        return Uses.make(cards, times[: cards.size], dev, amount, hard_negative=BUSY_MERCHANT)

    def _large_purchase(self, start: int, rng: np.random.Generator) -> Uses | None:
        s = self.s.large_purchase
        card = self.fraud._home_card(rng, start + HOUR_MS)
        if card is None:
            return None
        ent = np.array([card], dtype=np.int32)
        category = self._large[rng.integers(0, self._large.shape[0], 1)]
        payer = HOLDER
        if rng.random() < s.online_share:
            dev = self.shops.online(category, rng)
            if self.fraud.payers.rng.random() < s.new_device_share:
                payer = int(self.fraud.payers.strangers(1)[0])
        else:
            dev = self.shops.at_pos(self.cards.home[ent], category, rng)
        multiple = max(float(s.amount_multiple.sample(rng, 1)[0]), 1.0)
        amount = cents(np.array([multiple * self.cards.typical_amount[card]]))
        return Uses.make(
            ent, np.array([start]), dev, amount, hard_negative=LARGE_PURCHASE, payer=payer
        )
