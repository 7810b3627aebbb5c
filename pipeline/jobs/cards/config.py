"""Settings of job `cards`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from core.config.base import Settings
from core.contracts import topics
from detectors import (
    SpendingParams,
    TerminalParams,
    TravelParams,
    VelocityParams,
)
from detectors.cards.spending import PROFILE_SPENDING
from pipeline.settings import (
    Duration,
    StateStore,
    TriggerSettings,
    WindowSpec,
    duration_ms,
    offsets_form,
)
from pipeline.sketch_settings import SketchSettings

CardRule = Literal["velocity", "compromised_terminal", "impossible_travel", "spending_anomaly"]
CARD_RULES: tuple[CardRule, ...] = (
    "velocity",
    "compromised_terminal",
    "impossible_travel",
    "spending_anomaly",
)


class CardsSettings(Settings):
    """Job `cards`: card features, fraud rules, and where their results go.

    Thresholds are the detectors' own models (the same keys the fraud endpoint takes). The
    velocity and terminal rules run on windows of their own `window_s` sliding by
    `rule_slide`.
    """

    features_topic: str = Field(
        topics.CARD_FEATURES.name, description="Kafka topic for the per-card window features."
    )
    feature_windows: list[WindowSpec] = Field(
        default_factory=lambda: [
            WindowSpec(length="1 minute"),
            WindowSpec(length="10 minutes"),
            WindowSpec(length="1 hour"),
        ],
        min_length=1,
        description="Per-card event-time windows of the features topic. Tumbling by default: "
        "a sliding window costs a state row per card per slide it spans (10 minutes sliding "
        "by 1 minute made the features query three times slower).",
    )
    distinct_rsd: float = Field(
        0.05,
        ge=0.01,
        le=0.3,
        description="Relative standard deviation of approx_count_distinct (HyperLogLog++).",
    )
    rules: list[CardRule] = Field(
        default_factory=lambda: list(CARD_RULES),
        min_length=1,
        description="Which rules raise alerts.",
    )
    velocity: VelocityParams = Field(
        default_factory=VelocityParams,
        description="Card testing; also sets features' small amount. Defaults are the "
        "detector's, as the fraud endpoint's.",
    )
    terminal: TerminalParams = Field(
        default_factory=TerminalParams,
        description="Compromised terminal. Defaults are the detector's, as the fraud endpoint's.",
    )
    terminal_key: Literal["terminal", "merchant"] = Field(
        "terminal",
        description="What the terminal rule counts cards at, as the fraud endpoint's "
        "`terminal_key`: `terminal` (terminal_id; merchant_id for online uses, which have none) "
        "or `merchant` (merchant_id: a rush at a busy merchant's many tills adds up).",
    )
    rule_slide: Duration | None = Field(
        "1 minute",
        description="Slide of the velocity and terminal rules' windows: a burst shorter than "
        "window - slide falls whole into one window, and alerts once, at the window that first "
        "crosses the threshold. Unset (or the window's length): tumbling windows, which may "
        "split a burst at a boundary.",
    )
    travel: TravelParams = Field(TravelParams(), description="Impossible travel.")
    spending: SpendingParams = Field(
        default_factory=PROFILE_SPENDING.model_copy,
        description="Account takeover: with `profiles_topic`, judged against each card's "
        "profile (and the payer's device), as the fraud endpoint does, with its thresholds; "
        "without, against the card's history in the stream.",
    )
    profiles_topic: str | None = Field(
        topics.CARDS_PROFILES.name,
        description="Compacted topic of cardholder profiles (`cards.profile/1`) the spending "
        "rule judges each purchase against, fed into the rules' stateful operator and applied "
        "on arrival; a card without a profile is not judged. Malformed profiles go to the "
        "dead-letter topic. Null: no profiles, the spending rule builds each card's history "
        "from the stream (min_history purchases).",
    )
    compromised_cards_topic: str | None = Field(
        None,
        description="Where the `cards.compromised-cards` query publishes a Bloom filter of the "
        "cards seen at a terminal in each window the compromised-terminal rule fires on "
        "(`pipeline.jobs.cards.bloom`; sizing in `detectors.cards.bloom`), for the fraud "
        "endpoint to review those cards' card-not-present purchases. Null: no such query "
        "(the shipped `config/pipelines/cards.yaml` names `cards.compromised-cards`).",
    )
    sketches: SketchSettings = Field(
        SketchSettings(),
        description="`cards.sketches`: per window the busiest terminals and merchants "
        "(Count-Min) and the distinct cards per terminal (HyperLogLog), to "
        "`aggregates.heavy-hitters` and `aggregates.distinct-counts` (`pipeline.sketches`).",
    )
    profiles_starting_offsets: str = Field(
        "earliest",
        description="Where the profiles read starts: earliest (a compacted topic is read "
        'whole), latest, or Spark\'s JSON form {"topic": {"0": 42}} (the demo starts at the '
        "run's own profiles).",
    )
    card_state_ttl: Duration | None = Field(
        "30 days",
        description="Forget a card's travel and spending state, its profile included, once the "
        "watermark is this far past its latest transaction or profile (event time); unset: "
        "keep it forever.",
    )
    state_buckets: int = Field(
        32,
        ge=1,
        le=100_000,
        description="Buckets of cards and merchants the rules' state is kept in (the stateful "
        "operator's grouping key): each costs a state read and write per batch, however many "
        "entities it holds. Part of the checkpoint: change it only with a fresh checkpoint.",
    )
    state_operator: Literal["applyInPandasWithState", "transformWithStateInPandas"] = Field(
        "applyInPandasWithState",
        description="The PySpark API of the rules' one stateful operator. applyInPandasWithState "
        "ships each bucket's state with its rows; transformWithStateInPandas reads and writes "
        "it over the state server and starts a Python worker on the driver at planning.",
    )
    state_store: StateStore = Field(
        "memory",
        description="State store of the job's queries. memory: Spark's default HDFS-backed "
        "store, state in the JVM heap (spark.driver_memory), fastest while it fits; "
        "rocksdb: state on local disk, "
        "for more cards than the heap holds, and needed by transformWithStateInPandas. "
        "Part of the checkpoint: a checkpoint keeps the store it was created with.",
    )
    rules_form: Literal["python", "engine"] = Field(
        "python",
        description="python: every rule in the one Python stateful operator "
        "(`pipeline.jobs.cards.state`); engine: velocity and compromised terminal as one "
        "sliding-window aggregation, impossible travel as a time-bounded self-join "
        "(`pipeline.jobs.cards.engine`), each its own query with no Python worker, and only "
        "the spending rule left in the Python operator, fed only card rows. Differences by "
        "design: `pipeline.rules.velocity`, `.terminal`, `.travel`.",
    )
    features_trigger: TriggerSettings = Field(
        TriggerSettings(mode="microbatch", interval="10 seconds"),
        description="Trigger of the features query: larger, fewer batches than the alerts "
        "query's, whose batches its FAIR pool (`aggregates`) lets go first. A job that drains "
        "its input (trigger available_now) drains this query too.",
    )
    deadletter_trigger: TriggerSettings = Field(
        TriggerSettings(mode="realtime", interval="5 seconds"),
        description="Trigger of the stateless dead-letter query (Real-time Mode by default).",
    )
    provisional_features: bool = Field(
        False,
        description="Also run `cards.features-provisional`: the features aggregation "
        "in update mode into the same topic, a row per window each batch that changes it, "
        "marked `final: false`, ahead of the final row (`final: true`) that the features "
        "query emits once the watermark passes the window's end. It reads the input once "
        "more and costs the state of a second aggregation.",
    )

    @field_validator("profiles_starting_offsets")
    @classmethod
    def _offsets_form(cls, value: str) -> str:
        return offsets_form(value)

    @model_validator(mode="after")
    def _store_fits(self) -> CardsSettings:
        if self.state_operator == "transformWithStateInPandas" and self.state_store != "rocksdb":
            raise ValueError("state_operator transformWithStateInPandas needs state_store: rocksdb")
        return self

    @model_validator(mode="after")
    def _slide_fits(self) -> CardsSettings:
        slide = self.rule_slide_ms
        shortest = min(self.velocity.window_ms, round(self.terminal.window_s * 1000))
        if slide is not None and not 0 < slide <= shortest:
            raise ValueError(
                f"rule_slide must be > 0 and at most the rules' shortest window ({shortest} ms)"
            )
        return self

    @property
    def rule_slide_ms(self) -> int | None:
        return None if self.rule_slide is None else duration_ms(self.rule_slide)


#: Numeric `vehicle.telemetry/1` fields a vehicle detector or statistic may read.
