"""Response schemas of the read routes for the control panel (`api.panel.routes.feeds`). A row of
a topic is derived from the topic's record in `core.contracts`, not listed again."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from core.contracts import ALERT, CARD_ACTIVITY
from live.views.feeds import ACTIVITY_FIELDS


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Source(BaseModel):
    """How the feed behind a response is doing."""

    topic: str
    status: str = Field(description="starting, live, waiting for Kafka, stopped.")
    partitions: int = Field(description="Partitions of the topic being followed (0: none yet).")
    error: str | None


#: The fields are the contract's, made at import.
_ACTIVITY = CARD_ACTIVITY.model(
    ACTIVITY_FIELDS, title="ActivityRow", nullable_except=("card_token", "card_last4")
)
_ALERT = ALERT.model(title="AlertRow", nullable_except=("alert_id", "rule"), extra="allow")


class ActivityRow(_ACTIVITY):  # type: ignore[misc,valid-type]
    """A decision from `cards.activity` (`core.contracts.CARD_ACTIVITY`, the fields the UI may
    see): the card as token + last 4 digits, never the PAN."""


class ActivityFeed(BaseModel):
    activity: list[ActivityRow] = Field(description="Newest decision first.")
    count: int
    source: Source


class AlertRow(_ALERT):  # type: ignore[misc,valid-type]
    """An alert of a pipeline detector (`detectors.Alert`, as the Spark job writes it): the
    alerts topic's record, `core.contracts.ALERT`."""


class AlertFeed(BaseModel):
    alerts: list[AlertRow] = Field(description="Newest detection first.")
    count: int
    source: Source


class QueryProgress(_Open):
    """The latest `pipeline.progress/1` report of one streaming query, and totals."""

    query: str
    job: str | None
    mode: str | None = Field(description="realtime or microbatch.")
    batch_id: int | None
    input_rows: int | None
    input_rows_per_s: float | None
    processed_rows_per_s: float | None
    watermark: str | None = Field(description="As Spark reports it (ISO 8601).")
    watermark_ms: int | None
    watermark_delay_s: float | None = Field(
        description="Report time (wall clock) minus watermark (event time): mixes the two "
        "clocks, so it is days for a stream of simulated past dates. "
        "`watermark_behind_newest_s` is the lag on the stream's own clock."
    )
    newest_event_ms: int | None = Field(
        None, description="The newest event time the last batch read (Spark's eventTime.max)."
    )
    watermark_behind_newest_s: float | None = Field(
        None,
        description="Newest event time read minus watermark, both event time (simulated for a "
        "simulated run): how far the watermark trails the data.",
    )
    offsets_behind: int | None = Field(
        None,
        description="Records the query was behind the end of its Kafka topics at the last "
        "batch: latest minus end offset, summed over partitions.",
    )
    dropped_by_watermark: int | None = Field(description="Late rows dropped in the last batch.")
    duration_ms: int | None
    at: int | None = Field(description="When the report was published, epoch ms.")
    report_age_s: float | None = Field(description="Seconds since that report.")
    batches_seen: int
    input_rows_seen: int
    dropped_by_watermark_seen: int = Field(
        description="Late rows dropped, over reports seen (summed over stateful operators: a "
        "late row that several operators drop counts several times)."
    )
    late_events: int | None = Field(
        None,
        description="Input rows the last batch dropped as late, each counted once (the most "
        "any operator dropped).",
    )
    late_events_seen: int = Field(
        0,
        description="Late input rows over reports seen, each counted once. A job's figure is "
        "the largest of its queries' (they read the same input).",
    )


class JobProgress(BaseModel):
    """One job's queries together."""

    job: str
    queries: int
    modes: list[str] = Field(description="realtime and/or microbatch.")
    input_rows_per_s: float = Field(description="Summed over its queries' latest reports.")
    processed_rows_per_s: float = Field(description="Summed over its queries' latest reports.")
    watermark_delay_s: float | None = Field(
        description="Wall clock against event time: the largest of its queries'."
    )
    watermark_behind_newest_s: float | None = Field(
        None,
        description="Newest event time read minus watermark (event time, simulated for a "
        "simulated run): the largest of its queries'.",
    )
    offsets_behind: int | None = Field(
        None,
        description="Records behind the end of its Kafka topics: the largest of its queries' "
        "(they read the same input).",
    )
    late_events_seen: int = Field(
        description="Late input rows, each counted once: the largest of its queries' "
        "`late_events_seen` (they read the same input with the same watermark)."
    )


class PipelineView(BaseModel):
    queries: list[QueryProgress]
    jobs: list[JobProgress] = Field(default_factory=list, description="By job name.")
    source: Source


class TopicRate(BaseModel):
    topic: str
    records_per_s: float | None = Field(description="Over the last sample interval.")
    end_offset: int = Field(description="Sum of the partitions' end offsets.")


class RateSample(BaseModel):
    at: int = Field(description="Epoch ms.")
    rates: dict[str, float]


class Rates(BaseModel):
    sampled_at: int | None = Field(description="Epoch ms of the latest sample.")
    interval_s: float
    topics: list[TopicRate]
    history: list[RateSample] = Field(description="Oldest first, one per sample.")
    error: str | None


class Evaluation(BaseModel):
    file: str
    modified_at: int = Field(description="Epoch ms.")
    report: dict[str, Any] = Field(
        description="As `streamsim evaluate --json` prints it: scenario, paths (per path and "
        "label: precision, recall, f1, support, latency_ms), late_dropped, "
        "hard_negative_alerts, parity."
    )
