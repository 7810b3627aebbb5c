"""Settings of the fraud endpoint: thresholds, scoring, state bounds, and the two secrets.

Where they come from:
- the stack config (`--config STACK_YAML`): Kafka, and `api.host` / `api.port`;
- an optional API settings YAML (`streamsim api --settings FILE`, or $STREAMSIM_API_SETTINGS),
  validated into `ApiSettings`; the rule thresholds are the detectors' own parameter models;
- secrets from the environment only, never from YAML:
  - `STREAMSIM_PAN_SECRET`: the HMAC key of card tokens. Unset: a random key is created once
    in `<dirs.data>/api/pan-secret` (mode 0600) and reused, so tokens stay stable across
    restarts on this machine. Every endpoint instance on one topic needs the same key, and so
    does the simulator (`core.pan.pan_secret` resolves it for both).
  - `STREAMSIM_API_TOKEN`: the bearer token of the control routes. Unset: they are disabled.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from core.config import StackConfig, load_model
from core.config.base import Settings
from core.contracts import topics
from core.pan import PAN_SECRET_ENV, pan_secret
from detectors import TerminalParams, TravelParams, VelocityParams
from detectors.cards.bloom import CompromisedCardParams
from detectors.cards.spending import PROFILE_SPENDING, SpendingParams

API_TOKEN_ENV = "STREAMSIM_API_TOKEN"
SETTINGS_ENV = "STREAMSIM_API_SETTINGS"

Decision = Literal["approve", "review", "decline"]


class Scoring(Settings):
    """How fired rules become a score and a decision.

    score = 1 - prod(1 - weight of each fired rule); decline at `decline_at`, review at
    `review_at`, approve below. Defaults: impossible travel alone declines, velocity alone
    sends to review, both decline. A compromised terminal sends the crossing use to review: the
    alert is about the merchant, and the card paying there is its victim, not its thief. A
    card-not-present purchase by a card seen at a compromised terminal (`compromised_card`)
    goes to review too: the holder may be paying, or whoever skimmed the card.
    """

    weights: dict[str, float] = Field(
        default_factory=lambda: {
            "impossible_travel": 0.9,
            "velocity": 0.6,
            "spending_anomaly": 0.6,
            "compromised_terminal": 0.5,
            "compromised_card": 0.5,
        },
        description="Score weight in [0, 1] of each rule when it fires.",
    )
    decline_at: float = Field(0.85, gt=0, le=1, description="Scores at or above: decline.")
    review_at: float = Field(0.5, gt=0, le=1, description="Scores at or above: review.")

    @model_validator(mode="after")
    def _ordered(self) -> Scoring:
        if self.review_at > self.decline_at:
            raise ValueError("review_at must be <= decline_at")
        for rule, weight in self.weights.items():
            if not 0 <= weight <= 1:
                raise ValueError(f"weights.{rule} must be in [0, 1], got {weight}")
        return self


class IdempotencySettings(Settings):
    """The verdict cache: a repeated transaction_id gets the stored verdict."""

    max_entries: int = Field(
        200_000, ge=1, description="Verdicts kept (least recently used evicted first)."
    )
    ttl_s: float = Field(
        2 * 86_400.0, gt=0, description="A verdict older than this (decided_at) is forgotten."
    )


class StateSettings(Settings):
    """Bounds of the last-use state. Memory, roughly: 2.5 KiB per card plus 0.4 KiB per
    transaction held, plus 0.7 KiB per cached verdict (`idempotency.max_entries`), plus
    about 0.3 KiB per use inside the terminal window (every use of the last `window_s`)."""

    max_cards: int = Field(
        200_000, ge=1, description="Cards kept (least recently used evicted first)."
    )
    positions_per_card: int = Field(8, ge=1, le=1024, description="Located uses per card.")
    transactions_per_card: int = Field(
        64,
        ge=1,
        le=100_000,
        description="Recent transactions kept per card for the velocity window (the window "
        "count saturates here; at least velocity.min_count are always kept).",
    )
    max_merchants: int = Field(
        100_000,
        ge=1,
        description="Merchants (terminals) whose recent uses are kept for the compromised "
        "terminal rule (least recently used evicted first; ones idle a whole window earlier).",
    )
    uses_per_merchant: int = Field(
        4096,
        ge=1,
        le=1_000_000,
        description="Uses kept per merchant inside the terminal window (oldest dropped first: "
        "the distinct count saturates there; at least terminal.min_distinct_cards are kept).",
    )
    anchor_declined: bool = Field(
        False,
        description="Whether a declined card-present use becomes the card's last location. "
        "False: a fraudulent use abroad does not make the owner's next use look impossible.",
    )


class ApiSettings(Settings):
    """The `api` settings file; every key has a default."""

    kind: Literal["api"] = "api"
    topic: str = Field(topics.CARDS_ACTIVITY.name, min_length=1, description="Decisions go here.")
    travel: TravelParams = Field(default_factory=TravelParams)
    velocity: VelocityParams = Field(
        default_factory=VelocityParams,
        description="The velocity rule (card testing); defaults are the detector's (tuned on "
        "the cards-tuning suite), as the cards job's.",
    )
    terminal: TerminalParams | None = Field(
        default_factory=TerminalParams,
        description="The compromised terminal rule: distinct cards at one terminal "
        "(`terminal_key`) in the window ending at its latest use; alerts once per burst. "
        "Defaults are the detector's (tuned on the cards-tuning suite), as the cards "
        "job's. None: off.",
    )
    terminal_key: Literal["terminal", "merchant"] = Field(
        "terminal",
        description="What the terminal rule counts cards at: `terminal` (terminal_id; "
        "merchant_id for online uses, which have none) or `merchant` (merchant_id, as the "
        "cards job does). `terminal`: a rush at a busy merchant spreads over its tills "
        "(on the cards-tuning seeds 101-103, 9 runs, it removed all 5 busy-merchant alerts "
        "and lost no incident).",
    )
    spending: SpendingParams = Field(
        default_factory=PROFILE_SPENDING.model_copy,
        description="The spending rule (account takeover), judged against each card's profile: "
        "only purchases from a device the profile does not list, above 150.00, 3x the typical "
        "ticket, in a category under 2% of the history (set on the cards-tuning suite).",
    )
    profiles_topic: str | None = Field(
        topics.CARDS_PROFILES.name,
        description="Compacted topic of cardholder profiles, rebuilt on start and followed; "
        "None: no profiles (the spending rule never fires).",
    )
    compromised_cards: CompromisedCardParams | None = Field(
        default_factory=CompromisedCardParams,
        description="Compromised cards: the cards job's Bloom filters of the cards seen at a "
        "terminal while the compromised-terminal rule fired (`compromised_cards_topic`); a "
        "purchase in `channels` by a card in one, within `apply_s` after its window, raises "
        "`compromised_card` (see scoring). Defaults are the detector's "
        "(`detectors.cards.bloom`), as the job's. None: off.",
    )
    compromised_cards_topic: str | None = Field(
        topics.CARDS_COMPROMISED_CARDS.name,
        description="Topic of those filters, followed from the records appended within "
        "`compromised_cards.apply_s` before start-up; None: none are loaded.",
    )
    scoring: Scoring = Field(default_factory=Scoring)
    idempotency: IdempotencySettings = Field(default_factory=IdempotencySettings)
    state: StateSettings = Field(default_factory=StateSettings)
    token_hex_chars: int = Field(32, ge=16, le=64, description="Hex digits of a card token.")
    rebuild_lookback_s: float | None = Field(
        None,
        ge=0,
        description="Rebuild the state only from records appended this many seconds before "
        "start-up or later (Kafka's offsets for times); unset: the whole topic. 0 starts "
        "empty and keeps only what arrives from now on (`streamsim demo` does, so a run "
        "stands alone).",
    )
    rebuild_timeout_s: float = Field(
        60.0,
        ge=0,
        description="How long start-up waits for the state rebuild from the topic before "
        "serving anyway (health then says `rebuilding`).",
    )
    flush_timeout_s: float = Field(
        120.0,
        ge=0,
        description="How long shutdown waits for the broker to acknowledge the decisions "
        "already answered; what is left then is logged as lost. Longer than a quota's "
        "throttle (Kafka mutes a throttled client for up to ~10 s).",
    )
    durability: Literal["ack", "log", "none"] = Field(
        "ack",
        description="When a verdict is answered (`api.fraud.durability`): `ack` once the broker "
        "acknowledged its cards.activity record (a kill -9 loses no answered decision); `log` "
        "once the record is in a local write-ahead log (fsynced with `wal_fsync`), replayed "
        "into Kafka on restart; `none` before the broker acknowledges (a kill -9 loses the "
        "decisions answered in the last ~100 ms linger).",
    )
    ack_timeout_s: float = Field(
        10.0,
        gt=0,
        description="Under `ack`: how long a request waits for its record's acknowledgement "
        "before it is answered 503 with Retry-After (the retry gets the cached verdict).",
    )
    ack_poll_interval_ms: float | None = Field(
        None,
        gt=0,
        description="Under `ack`: None (default): a poll thread serves the broker's "
        "acknowledgements and hands them to the event loop. A number: the loop itself polls "
        "(non-blocking) every this many ms while a request waits; measured at saturation it "
        "cost 1,044 us of server CPU a request against the thread's 541.",
    )
    wal_dir: Path | None = Field(
        None,
        description="Under `log`: the write-ahead log's directory; unset: "
        "`<dirs.data>/api/wal-<api.port>`. One instance per directory.",
    )
    wal_fsync: bool = Field(
        True,
        description="Under `log`: fdatasync the log before answering (group commit: one sync "
        "covers every request appended before it started). False: the answer leaves once the "
        "record is in the page cache (survives a kill -9, not a machine crash).",
    )
    max_in_flight: int | None = Field(
        512,
        ge=1,
        description="Load shedding: transactions in flight or queued in this instance beyond "
        "which a new one is answered 429 with Retry-After at once instead of queued. None: "
        "no bound.",
    )
    retry_after_s: int = Field(
        1, ge=0, description="The Retry-After (seconds) of a 429 or 503 answer."
    )
    gc_freeze_interval_s: float | None = Field(
        1.0,
        gt=0,
        description="Every this many seconds, collect young garbage and gc.freeze() what "
        "survives, so the cyclic GC never rescans the (cycle-free) last-use state: a full "
        "collection of a large card state pauses the endpoint otherwise. Cost: cyclic garbage "
        "that was alive at a freeze (e.g. a closed connection's objects) is never reclaimed. "
        "None: the default GC.",
    )


@dataclass(frozen=True)
class ApiSecrets:
    pan_secret: bytes
    api_token: str | None

    def __repr__(self) -> str:
        return f"ApiSecrets(api_token={'set' if self.api_token else 'unset'})"


def load_settings(path: str | Path | None = None) -> ApiSettings:
    """`path`, else $STREAMSIM_API_SETTINGS, else defaults."""
    chosen = path or os.environ.get(SETTINGS_ENV) or None
    return load_model(ApiSettings, chosen) if chosen else ApiSettings()


def run_settings() -> tuple[dict[str, Any], str]:
    """The settings of an endpoint a run or the demo starts (these, with no state rebuilt from
    earlier runs: each run has ids of its own) and the topic it publishes decisions to."""
    settings = load_settings().model_copy(update={"rebuild_lookback_s": 0.0})
    return settings.model_dump(mode="json"), settings.topic


def load_secrets(stack: StackConfig) -> ApiSecrets:
    return ApiSecrets(pan_secret=pan_secret(stack), api_token=os.environ.get(API_TOKEN_ENV) or None)


__all__ = ["PAN_SECRET_ENV", "ApiSecrets", "ApiSettings", "load_secrets", "load_settings"]
