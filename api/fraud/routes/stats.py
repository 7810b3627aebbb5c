"""GET /v1/stats: counters and handling-time percentiles for the UI."""

from __future__ import annotations

from fastapi import APIRouter, Request

from api.fraud.deps import service_of
from api.fraud.models import Stats
from api.responses import OrjsonResponse

router = APIRouter(prefix="/v1", tags=["read"])


@router.get("/stats", response_class=OrjsonResponse, responses={200: {"model": Stats}})
async def stats(request: Request) -> OrjsonResponse:
    """Requests, decisions by type, replays, 422s, latency p50/p99 (in-process handling time,
    HdrHistogram), publish counters and state size."""
    service = service_of(request)
    s = service.stats
    return OrjsonResponse(
        {
            "requests": s.requests,
            "decisions": dict(s.decisions),
            "replays": s.replays,
            "rejected": s.rejected,
            "errors": s.errors,
            "shed": s.shed,
            "latency_ms": s.latency_ms(),
            "publish": service.publisher.counters(),
            "state": service.state_stats(),
            "uptime_s": s.uptime_s(),
        }
    )
