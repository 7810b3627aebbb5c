"""`GET /v1/sketches`: the newest window's heavy hitters (Count-Min) and distinct counts
(HyperLogLog) per job and kind (`live.views.sketches`), estimates with their bounds, read from
the tail of their topics on request (`live.consumers.tails`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, status

from api.panel.deps import UNAVAILABLE, feeds_of
from api.panel.models.sketches import Sketches
from api.responses import OrjsonResponse
from core.contracts import topics
from live.consumers.tails import TopicsUnreachable, tail_records
from live.views.sketches import sketch_view

router = APIRouter(prefix="/v1", tags=["read"])
Limit = Annotated[int, Query(ge=1, le=200)]


@router.get(
    "/sketches",
    response_class=OrjsonResponse,
    responses={200: {"model": Sketches}, **UNAVAILABLE},
)
def sketches(request: Request, limit: Limit = 20) -> OrjsonResponse:
    """Per job and kind, the newest window's heavy hitters (`aggregates.heavy-hitters`:
    Count-Min estimates with ε, δ and ε·N) and distinct counts (`aggregates.distinct-counts`:
    HyperLogLog estimates with their relative standard error). 503 when Kafka is unreachable."""
    feeds = feeds_of(request)
    try:
        heavy = tail_records(feeds.stack, topics.HEAVY_HITTERS.name)
        distinct = tail_records(feeds.stack, topics.DISTINCT_COUNTS.name)
    except TopicsUnreachable as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc)) from None
    return OrjsonResponse(sketch_view(heavy, distinct, limit))
