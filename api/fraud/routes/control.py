"""Control routes (mutating): `Authorization: Bearer <STREAMSIM_API_TOKEN>` required.

There is deliberately no route that edits the last-use state: it is only ever derived from
`cards.activity` and the endpoint's own decisions.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from api.auth import TOKEN_RESPONSES, require_token
from api.fraud.deps import service_of
from api.fraud.models import StatsReset
from api.responses import OrjsonResponse

router = APIRouter(prefix="/v1/control", tags=["control"], dependencies=[Depends(require_token)])


@router.post(
    "/stats/reset",
    response_class=OrjsonResponse,
    responses={200: {"model": StatsReset}, **TOKEN_RESPONSES},
)
async def reset_stats(request: Request) -> OrjsonResponse:
    """Zero the request counters and the latency histogram (e.g. after a load-test warm-up)."""
    service_of(request).stats.reset()
    return OrjsonResponse({"reset": True})
