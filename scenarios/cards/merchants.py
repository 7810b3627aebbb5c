"""Merchants and their devices, made once: POS terminals in cities, online payment gateways.

Every city a card can be used in (homes, the other side of a border, travel destinations) gets
POS terminals, in proportion to the cards living there, split over the categories by their
weights, grouped into merchants of one category each; a merchant's terminals stand together,
somewhere in the city. Online merchants have a category, a country and one gateway each, and no
location.

Devices are indexed in blocks by entity class (the engine's device table): POS terminals are
of `terminal_class`, gateways of `online_class`. Lookups are vectorised: a purchase in city c
of category k picks uniformly among the city's terminals of that category (or of any category
when the city has none of it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scenarios.cards.config import CardsDomain
from scenarios.cards.world import World

KM_PER_DEG_LAT = 111.32
CARD_PRESENT, ONLINE, CARD_NOT_PRESENT = "card_present", "online", "card_not_present"


@dataclass
class Merchants:
    """Device columns (index = device index) and the lookups into them."""

    device_ids: list[str]
    class_counts: list[int]
    category: np.ndarray  # int32 index into the domain's categories
    city: np.ndarray  # int32 World index; -1 for online gateways
    lat: np.ndarray  # float64; NaN online
    lon: np.ndarray
    country: np.ndarray  # object: ISO 3166-1 alpha-2
    merchant_id: np.ndarray  # object: str
    terminal_id: np.ndarray  # object: str or None (online)
    channel: np.ndarray  # object: str
    mcc: list[str]  # by category index
    pos_first: int  # POS terminals are devices pos_first .. pos_first + n_pos - 1
    online_first: int
    n_pos: int
    n_online: int
    _slot: np.ndarray  # World index -> row of _ranges (-1: no terminals there)
    _ranges: np.ndarray  # (cities with terminals, categories + 1): local POS offsets
    _online_ranges: np.ndarray  # (categories + 1,): local online offsets by category

    @property
    def cities(self) -> np.ndarray:
        """World indices of the cities with POS terminals."""
        return np.flatnonzero(self._slot >= 0)

    def pos_device(self, city: np.ndarray, category: np.ndarray, u: np.ndarray) -> np.ndarray:
        """A POS terminal per purchase in `city` of `category` (u: uniform draws in [0, 1))."""
        slot = self._slot[city]
        if (slot < 0).any():
            raise ValueError("a purchase in a city without terminals")
        lo = self._ranges[slot, category]
        hi = self._ranges[slot, category + 1]
        empty = hi <= lo
        lo = np.where(empty, self._ranges[slot, 0], lo)
        hi = np.where(empty, self._ranges[slot, -1], hi)
        local = lo + np.minimum((u * (hi - lo)).astype(np.int64), hi - lo - 1)
        return (local + self.pos_first).astype(np.int32)

    def online_device(self, category: np.ndarray, u: np.ndarray) -> np.ndarray:
        """An online merchant's gateway per purchase of `category` (any, if none has it)."""
        r = self._online_ranges
        lo, hi = r[category], r[category + 1]
        empty = hi <= lo
        lo = np.where(empty, 0, lo)
        hi = np.where(empty, self.n_online, hi)
        local = lo + np.minimum((u * (hi - lo)).astype(np.int64), hi - lo - 1)
        return (local + self.online_first).astype(np.int32)

    def event_fragments(self) -> np.ndarray:
        """Per device, its event keys from merchant_id to terminal_id, as JSON bytes."""
        return self._fragments(with_card_present=True)

    def request_fragments(self) -> np.ndarray:
        """Per device, the same keys as the endpoint's request body takes them."""
        return self._fragments(with_card_present=False)

    def _fragments(self, with_card_present: bool) -> np.ndarray:
        # Ids, MCCs, channels and country codes are generated ASCII ([A-Za-z0-9-]): no escaping.
        here, there = (
            (b'"card_present":true,', b'"card_present":false,') if with_card_present else (b"", b"")
        )
        located = (
            b'"merchant_id":"%s","merchant_category":"%s","channel":"card_present",'
            + here
            + b'"lat":%.5f,"lon":%.5f,"country":"%s","terminal_id":"%s"'
        )
        remote = (
            b'"merchant_id":"%s","merchant_category":"%s","channel":"%s",'
            + there
            + b'"lat":null,"lon":null,"country":"%s","terminal_id":null'
        )
        mcc = [m.encode() for m in self.mcc]
        out = np.empty(len(self.device_ids), dtype=object)
        for d in range(len(self.device_ids)):
            merchant, country = self.merchant_id[d].encode(), self.country[d].encode()
            category = mcc[self.category[d]]
            if self.channel[d] == CARD_PRESENT:
                out[d] = located % (
                    merchant,
                    category,
                    self.lat[d],
                    self.lon[d],
                    country,
                    self.terminal_id[d].encode(),
                )
            else:
                out[d] = remote % (merchant, category, self.channel[d].encode(), country)
        return out

    @classmethod
    def build(
        cls,
        domain: CardsDomain,
        world: World,
        card_cities: np.ndarray,
        destinations: np.ndarray,
        class_names: list[str],
        rng: np.random.Generator,
    ) -> Merchants:
        m = domain.merchants
        n_cat = len(domain.categories)
        weights = np.array([c.weight for c in domain.categories])
        online_weights = np.array([c.online_weight for c in domain.categories])

        # POS terminals per city.
        cities, cards_there = np.unique(card_cities, return_counts=True)
        per_city = np.maximum(
            m.min_terminals_per_city, np.rint(cards_there * m.terminals_per_1k_cards / 1000)
        ).astype(np.int64)
        counts = dict(zip(cities.tolist(), per_city.tolist(), strict=True))
        for city in destinations.tolist():
            counts[city] = max(counts.get(city, 0), m.destination_terminals)
        used = np.array(sorted(counts), dtype=np.int64)
        sizes = np.array([counts[c] for c in used.tolist()], dtype=np.int64)
        # Categories in proportion to their weights (largest remainder), so no category of a
        # big city is served by a handful of terminals by bad luck.
        per_cat = _apportion(sizes, weights / weights.sum())
        t_city = np.repeat(np.repeat(used, n_cat), per_cat.ravel())
        t_cat = np.repeat(np.tile(np.arange(n_cat, dtype=np.int32), used.shape[0]), per_cat.ravel())
        n_pos = int(t_city.shape[0])
        # Merchants: runs of terminals of one city and category, geometric lengths, capped.
        breaks = rng.random(n_pos) < 1.0 / m.terminals_per_merchant
        breaks |= np.r_[True, (t_city[1:] != t_city[:-1]) | (t_cat[1:] != t_cat[:-1])]
        run_start = np.maximum.accumulate(np.where(breaks, np.arange(n_pos), 0))
        breaks |= (np.arange(n_pos) - run_start) % m.max_terminals_per_merchant == 0
        merchant = np.cumsum(breaks) - 1
        n_merchants = int(merchant[-1]) + 1 if n_pos else 0
        # Each merchant somewhere in its city; its terminals within ~50 m of each other.
        first = np.flatnonzero(breaks)
        m_city = t_city[first]
        spread = domain.geography.spread_km
        north = rng.normal(0.0, spread, n_merchants)
        east = rng.normal(0.0, spread, n_merchants)
        m_lat = np.clip(world.lat[m_city] + north / KM_PER_DEG_LAT, -89.9, 89.9)
        m_lon = world.lon[m_city] + east / (KM_PER_DEG_LAT * np.cos(np.radians(m_lat)))
        m_lon = (m_lon + 180.0) % 360.0 - 180.0
        jitter_km = rng.normal(0.0, 0.05, (n_pos, 2))
        t_lat = np.clip(m_lat[merchant] + jitter_km[:, 0] / KM_PER_DEG_LAT, -89.9, 89.9)
        t_lon = m_lon[merchant] + jitter_km[:, 1] / (KM_PER_DEG_LAT * np.cos(np.radians(t_lat)))
        t_lon = (t_lon + 180.0) % 360.0 - 180.0

        # Online merchants: a category, a country like the card holders', a channel.
        n_online = m.online_merchants
        po = online_weights / online_weights.sum()
        o_cat = np.sort(rng.choice(n_cat, n_online, p=po)).astype(np.int32)
        home_countries = world.country[card_cities]
        o_country = home_countries[rng.integers(0, home_countries.shape[0], n_online)]
        o_moto = rng.random(n_online) < m.card_not_present_share

        # Device order: blocks by class.
        pos_class, online_class = _classes(domain, class_names)
        pos_first = 0 if pos_class <= online_class else n_online
        online_first = n_pos if pos_class <= online_class else 0
        class_counts = [0] * len(class_names)
        class_counts[pos_class] += n_pos
        class_counts[online_class] += n_online
        n_dev = n_pos + n_online
        pos_rows = np.arange(pos_first, pos_first + n_pos)
        on_rows = np.arange(online_first, online_first + n_online)

        device_ids = np.empty(n_dev, dtype=object)
        merchant_id = np.empty(n_dev, dtype=object)
        terminal_id = np.empty(n_dev, dtype=object)
        width = max(6, len(str(n_merchants + n_online)))
        pos_merchants = [f"m-{i:0{width}d}" for i in range(n_merchants)]
        merchant_id[pos_rows] = [pos_merchants[i] for i in merchant.tolist()]
        tids = [f"t-{i:0{width + 1}d}" for i in range(n_pos)]
        terminal_id[pos_rows] = tids
        device_ids[pos_rows] = tids
        online_ids = [f"m-{n_merchants + i:0{width}d}" for i in range(n_online)]
        merchant_id[on_rows] = online_ids
        terminal_id[on_rows] = None
        device_ids[on_rows] = [f"gw-{mid}" for mid in online_ids]

        category = np.empty(n_dev, dtype=np.int32)
        category[pos_rows], category[on_rows] = t_cat, o_cat
        city = np.full(n_dev, -1, dtype=np.int32)
        city[pos_rows] = t_city
        lat = np.full(n_dev, np.nan)
        lon = np.full(n_dev, np.nan)
        lat[pos_rows], lon[pos_rows] = t_lat, t_lon
        country = np.empty(n_dev, dtype=object)
        country[pos_rows] = world.country[t_city]
        country[on_rows] = o_country
        channel = np.empty(n_dev, dtype=object)
        channel[pos_rows] = CARD_PRESENT
        channel[on_rows] = np.where(o_moto, CARD_NOT_PRESENT, ONLINE)

        slot = np.full(len(world), -1, dtype=np.int64)
        slot[used] = np.arange(used.shape[0])
        keys = slot[t_city] * (n_cat + 1) + t_cat  # sorted, as terminals are
        grid = np.arange(used.shape[0])[:, None] * (n_cat + 1) + np.arange(n_cat + 1)[None, :]
        ranges = np.searchsorted(keys, grid, side="left")
        # The last column must be the city's end: the start of the next city.
        ranges[:, -1] = np.r_[ranges[1:, 0], n_pos] if used.shape[0] else ranges[:, -1]
        online_ranges = np.searchsorted(o_cat, np.arange(n_cat + 1), side="left")

        return cls(
            device_ids=device_ids.tolist(),
            class_counts=class_counts,
            category=category,
            city=city,
            lat=lat,
            lon=lon,
            country=country,
            merchant_id=merchant_id,
            terminal_id=terminal_id,
            channel=channel,
            mcc=[c.mcc for c in domain.categories],
            pos_first=pos_first,
            online_first=online_first,
            n_pos=n_pos,
            n_online=n_online,
            _slot=slot,
            _ranges=ranges,
            _online_ranges=online_ranges,
        )


def _apportion(totals: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """Split each total over the shares in whole numbers (largest remainder), rows = totals."""
    exact = totals[:, None] * shares[None, :]
    counts = np.floor(exact).astype(np.int64)
    short = totals - counts.sum(axis=1)
    by_remainder = np.argsort(-(exact - counts), axis=1, kind="stable")
    ranks = np.empty_like(by_remainder)
    np.put_along_axis(ranks, by_remainder, np.arange(shares.shape[0])[None, :], axis=1)
    return counts + (ranks < short[:, None])


def _classes(domain: CardsDomain, class_names: list[str]) -> tuple[int, int]:
    pos = class_names.index(domain.terminal_class) if domain.terminal_class else 0
    online = class_names.index(domain.online_class) if domain.online_class else len(class_names) - 1
    return pos, online
