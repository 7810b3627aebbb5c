"""Settings of job `shipping`."""

from __future__ import annotations

from pydantic import Field

from core.config.base import Settings
from core.contracts import topics
from pipeline.settings import Duration

#: The job reads each topic as its kind of row (`job.SOURCES`), so it reads these, all three.
INPUT_TOPICS = (
    topics.SHIPPING_POSITIONS.name,
    topics.SHIPPING_CONTAINERS.name,
    topics.SHIPPING_PORT_EVENTS.name,
)


class ShippingSettings(Settings):
    """Job `shipping`: per-container and per-ship logs, the shipping rules, days-late data.

    The job's `watermark` is the live one: an alert more than that behind its log's newest
    event when raised is published with `late: true`. Nothing is dropped for being later than
    it; only rows older than `history` behind their log's newest event are (and counted).
    """

    history: Duration = Field(
        "21 days",
        description="Event time a container's or ship's log keeps behind its newest event; "
        "older rows are dropped and counted (late_events of query shipping.late-drops). "
        "Longer than a voyage leg, so a voyage flushed in port is re-scored whole.",
    )
    settle: Duration = Field(
        "3 seconds",
        description="Processing time a log waits after its latest backfill rows (held on "
        "board, flushed in port) before it re-runs the rules: a voyage's backlog lands over "
        "several batches and is scored once, whole. Live rows do not put it off.",
    )
