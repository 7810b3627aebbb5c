"""Read routes for the control panel (open), from the topic feeds: recent alerts and decisions,
pipeline progress, records/s per topic."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Query, Request

from api.panel.deps import UNAVAILABLE, feeds_of
from api.panel.models.feeds import ActivityFeed, AlertFeed, PipelineView, Rates
from api.responses import OrjsonResponse
from live.views.feeds import job_summaries

router = APIRouter(prefix="/v1", tags=["read"])

Limit = Annotated[int, Query(ge=1, le=500, description="At most this many, newest first.")]


@router.get(
    "/alerts",
    response_class=OrjsonResponse,
    responses={200: {"model": AlertFeed}, **UNAVAILABLE},
)
def alerts(request: Request, limit: Limit = 50) -> OrjsonResponse:
    """Recent alerts of the pipeline detectors (the `alerts` topic), evidence decoded."""
    feeds = feeds_of(request)
    rows = feeds.alerts.recent(limit)
    return OrjsonResponse(
        {"alerts": rows, "count": len(rows), "source": feeds.source(feeds.alerts_topic)}
    )


@router.get(
    "/activity/recent",
    response_class=OrjsonResponse,
    responses={200: {"model": ActivityFeed}, **UNAVAILABLE},
)
def recent_activity(request: Request, limit: Limit = 100) -> OrjsonResponse:
    """Recent decisions of the fraud endpoint (the activity topic): card token and last 4,
    location, decision, score, reasons, evidence, event time. Never a PAN."""
    feeds = feeds_of(request)
    rows = feeds.activity.recent(limit)
    return OrjsonResponse(
        {"activity": rows, "count": len(rows), "source": feeds.source(feeds.activity_topic)}
    )


@router.get(
    "/pipeline",
    response_class=OrjsonResponse,
    responses={200: {"model": PipelineView}, **UNAVAILABLE},
)
def pipeline(request: Request) -> OrjsonResponse:
    """The latest progress of each streaming query (the `metrics` topic): mode, rows/s,
    watermark and how far it trails, late rows dropped; and per job: rows/s, the largest
    watermark delay, late input rows counted once."""
    feeds = feeds_of(request)
    now = time.time_ns() // 1_000_000
    queries = feeds.progress.queries(now)
    return OrjsonResponse(
        {
            "queries": queries,
            "jobs": job_summaries(queries),
            "source": feeds.source(feeds.metrics_topic),
        }
    )


@router.get(
    "/rates",
    response_class=OrjsonResponse,
    responses={200: {"model": Rates}, **UNAVAILABLE},
)
def rates(request: Request) -> OrjsonResponse:
    """Records/s per topic, from end-offset deltas sampled every second (the last two minutes
    in `history`)."""
    feeds = feeds_of(request)
    tracker = feeds.rates
    now_rates = tracker.rates()
    topics = [
        {"topic": topic, "records_per_s": now_rates.get(topic), "end_offset": end}
        for topic, end in sorted(tracker.ends().items())
    ]
    return OrjsonResponse(
        {
            "sampled_at": tracker.sampled_at(),
            "interval_s": feeds.sample_s,
            "topics": topics,
            "history": tracker.history(),
            "error": feeds.last_error,
        }
    )
