"""Request and response schemas of the HTTP API.

Only `TransactionRequest` is validated at run time; the response models document the bodies
(OpenAPI at /docs) and the tests check real bodies against them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationInfo, field_validator

from core.pan import PAN_MAX_DIGITS, PAN_MIN_DIGITS, find_pan, luhn_valid

Channel = Literal["card_present", "card_not_present", "online"]
CARD_PRESENT = "card_present"
#: event_time bounds, epoch ms: the epoch itself (a device clock reset to 0 is real input)
#: up to 2100-01-01T00:00:00Z.
EVENT_TIME_MIN_MS = 0
EVENT_TIME_MAX_MS = 4_102_444_800_000

_ID = r"^[A-Za-z0-9][A-Za-z0-9._:/@#-]*$"
_EXAMPLE: dict[str, JsonValue] = {
    "transaction_id": "tx-000123",
    "card_number": "4111111111111111",
    "amount": 42.5,
    "currency": "EUR",
    "merchant_id": "m-0042",
    "merchant_category": "5411",
    "channel": "card_present",
    "lat": 48.8566,
    "lon": 2.3522,
    "country": "FR",
    "event_time": 1767225600000,
    "terminal_id": "pos-7",
}


#: The channel rule of `lat` and `lon` in JSON Schema, for clients and fuzzers.
_LOCATED_IFF_CARD_PRESENT: dict[str, JsonValue] = {
    "if": {"properties": {"channel": {"const": "card_present"}}},
    "then": {
        "required": ["lat", "lon"],
        "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
    },
    "else": {"properties": {"lat": {"type": "null"}, "lon": {"type": "null"}}},
}


class TransactionRequest(BaseModel):
    """One authorization request from a point of sale or an online checkout.

    Strict types: a number must be a JSON number (an integer for `event_time`), never a
    boolean or a string. No string field but `card_number` may hold a card number, written out
    with separators or not (`core.pan.find_pan`).
    """

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        strict=True,
        json_schema_extra={"examples": [_EXAMPLE], "allOf": [_LOCATED_IFF_CARD_PRESENT]},
    )

    # First, so the fields after it can be checked for a copy of it.
    card_number: str = Field(
        min_length=PAN_MIN_DIGITS,
        max_length=PAN_MAX_DIGITS,
        pattern=r"^[0-9]+$",
        repr=False,
        description="The PAN: 12-19 digits, Luhn-valid. Never stored, published or logged; "
        "only its token and last 4 digits leave the request.",
    )
    transaction_id: str = Field(
        min_length=1,
        max_length=128,
        pattern=_ID,
        description="Unique per transaction; a repeat gets the same verdict (idempotency key).",
    )
    amount: float = Field(gt=0, le=1e9, allow_inf_nan=False, description="In `currency`, > 0.")
    currency: str = Field(pattern=r"^[A-Z]{3}$", description="ISO 4217 code, e.g. EUR.")
    merchant_id: str = Field(min_length=1, max_length=128, pattern=_ID)
    merchant_category: str = Field(
        min_length=1,
        max_length=64,
        pattern=r"^(\d{4}|[A-Za-z][A-Za-z0-9 _&/-]*)$",
        description="A 4-digit MCC (e.g. 5411) or a category name (e.g. grocery).",
    )
    channel: Channel = Field(
        description="card_present (a terminal, located), card_not_present or online."
    )
    lat: float | None = Field(
        None,
        ge=-90,
        le=90,
        allow_inf_nan=False,
        validate_default=True,
        description="Latitude of the terminal; required for card_present, absent otherwise.",
    )
    lon: float | None = Field(
        None,
        ge=-180,
        le=180,
        allow_inf_nan=False,
        validate_default=True,
        description="Longitude of the terminal; required for card_present, absent otherwise.",
    )
    country: str = Field(pattern=r"^[A-Z]{2}$", description="ISO 3166-1 alpha-2, e.g. FR.")
    event_time: int = Field(
        ge=EVENT_TIME_MIN_MS,
        le=EVENT_TIME_MAX_MS,
        description="Epoch ms from the device's own clock (may be skewed).",
    )
    terminal_id: str | None = Field(None, min_length=1, max_length=128, pattern=_ID)
    device_id: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        pattern=_ID,
        description="The payer's device (a browser or app fingerprint, a wallet's phone); "
        "null for a plastic card.",
    )

    @field_validator("card_number")
    @classmethod
    def _luhn(cls, value: str) -> str:
        if not luhn_valid(value):
            raise ValueError("card_number fails the Luhn check")
        return value

    # currency and country: their patterns admit no digit.
    @field_validator(
        "transaction_id", "merchant_id", "merchant_category", "terminal_id", "device_id"
    )
    @classmethod
    def _no_card_number(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return value
        pan = info.data.get("card_number")
        if pan and pan in value:
            raise ValueError(f"{info.field_name} must not contain the card number")
        if find_pan(value) is not None:
            raise ValueError(
                f"{info.field_name} must not contain a card number (a Luhn-valid run of "
                f"{PAN_MIN_DIGITS}-{PAN_MAX_DIGITS} digits, separators ignored)"
            )
        return value

    @field_validator("lat", "lon")
    @classmethod
    def _located_iff_card_present(cls, value: float | None, info: ValidationInfo) -> float | None:
        channel = info.data.get("channel")
        if channel is None:  # the channel itself was invalid; that error is enough
            return value
        if channel == CARD_PRESENT and value is None:
            raise ValueError(f"{info.field_name} is required when channel is card_present")
        if channel != CARD_PRESENT and value is not None:
            raise ValueError(f"{info.field_name} must be absent when channel is {channel}")
        return value

    @property
    def card_present(self) -> bool:
        return self.channel == CARD_PRESENT


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class LocatedUse(_Open):
    transaction_id: str
    event_time: int
    lat: float
    lon: float


class PreviousUse(_Open):
    """The card's latest earlier use (any channel), as the state held it."""

    transaction_id: str
    event_time: int
    channel: Channel
    country: str
    lat: float | None
    lon: float | None
    decision: Literal["approve", "review", "decline"]


class TravelEvidence(_Open):
    """From the located use nearest in event time (the one the rule compared against) to this
    one; the rule's thresholds are included. Null for uses without a location."""

    previous: LocatedUse
    distance_km: float = Field(description="Geodesic distance on WGS84.")
    gap_s: float = Field(description="Absolute event-time gap.")
    speed_kmh: float | None = Field(description="Implied speed; null for a zero gap.")
    fastest_s: float = Field(description="Least time the distance can be travelled in.")
    impossible: bool


class VelocityEvidence(_Open):
    """The window ending at this transaction (this one included), and the thresholds."""

    tx_count: int
    small_count: int
    amount_sum: float | None
    distinct_merchants: int | None
    window_s: float
    min_count: int


class AlertRef(BaseModel):
    alert_id: str
    rule: str
    label: str | None
    event_ids: list[str]


class Evidence(BaseModel):
    previous_use: PreviousUse | None
    travel: TravelEvidence | None
    velocity: VelocityEvidence
    alerts: list[AlertRef]


class TransactionResponse(BaseModel):
    """The verdict. A repeated transaction_id gets this same body, byte for byte."""

    transaction_id: str
    card_token: str = Field(description="Keyed HMAC-SHA256 of the PAN, truncated.")
    card_last4: str
    decision: Literal["approve", "review", "decline"]
    score: float = Field(ge=0, le=1)
    reasons: list[str] = Field(
        description="Rules that fired (impossible_travel, velocity, spending_anomaly, "
        "compromised_terminal, compromised_card), or no_history for an "
        "unknown card; state_incomplete while the state is still being rebuilt."
    )
    evidence: Evidence
    decided_at: int = Field(description="Processing time of the decision, epoch ms.")


class ValidationErrorItem(BaseModel):
    loc: list[str | int]
    msg: str
    type: str
    input: object | None = Field(None, description="The bad value; a card number is redacted.")


class ValidationErrorBody(BaseModel):
    detail: list[ValidationErrorItem]


class LastUse(_Open):
    transaction_id: str
    event_time: int
    channel: Channel
    amount: float
    currency: str
    merchant_id: str
    country: str
    lat: float | None
    lon: float | None
    decision: Literal["approve", "review", "decline"]
    decided_at: int


class CardLastUse(BaseModel):
    card_token: str
    card_last4: str
    last_use: LastUse
    last_located_use: LocatedUse | None
    recent_transactions: int = Field(description="Transactions held for the velocity window.")


class LatencyMs(BaseModel):
    count: int
    p50: float | None
    p90: float | None
    p99: float | None
    p999: float | None
    max: float | None


class PublishStats(BaseModel):
    sent: int
    delivered: int
    failed: int
    queued: int
    last_error: str | None


class FollowLag(BaseModel):
    """Milliseconds from another instance's publish of a decision to its application here."""

    count: int = Field(description="Records applied from the topic once live.")
    p50: int | None = None
    p99: int | None = None
    max: int | None = None


class StateStats(BaseModel):
    status: Literal["starting", "rebuilding", "live", "stopped", "disabled"]
    cards: int
    verdicts: int
    applied_from_topic: int
    malformed_records: int
    follow_lag_ms: FollowLag = Field(
        default_factory=lambda: FollowLag(count=0),
        description="State lag behind the other instances (cards.activity follow lag).",
    )


class Stats(BaseModel):
    requests: int = Field(description="POST /v1/transactions requests, replays and 422s too.")
    decisions: dict[str, int]
    replays: int
    rejected: int = Field(description="422 responses.")
    errors: int = Field(description="5xx responses.")
    shed: int = Field(0, description="429 responses of load shedding (not in `requests`).")
    latency_ms: LatencyMs = Field(description="In-process handling time, HdrHistogram.")
    publish: PublishStats
    state: StateStats
    uptime_s: float


class KafkaHealth(BaseModel):
    connected: bool
    bootstrap: str
    error: str | None


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    kafka: KafkaHealth
    state: StateStats
    publish: PublishStats


class StatsReset(BaseModel):
    reset: Literal[True]
