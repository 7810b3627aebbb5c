"""GET /v1/cards/{token}/last-use: what the state holds about one card (by token, never PAN)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request, status

from api.fraud.deps import service_of
from api.fraud.models import CardLastUse
from api.responses import OrjsonResponse
from core.pan import looks_like_token

router = APIRouter(prefix="/v1/cards", tags=["cards"])


@router.get(
    "/{token}/last-use",
    response_class=OrjsonResponse,
    responses={200: {"model": CardLastUse}, 404: {"description": "Unknown card token."}},
)
async def last_use(token: str, request: Request) -> OrjsonResponse:
    """The card's latest use, its latest located (card-present) use, and its recent count."""
    state = service_of(request).state
    body: dict[str, Any] | None = None
    if looks_like_token(token):  # never echo or look up anything else (a PAN in a URL)
        with state.lock:
            card = state.cards.get(token)
            if card is not None and card.last_use is not None:
                located = card.travel.last()
                body = {
                    "card_token": token,
                    "card_last4": card.last4,
                    "last_use": dict(card.last_use),
                    "last_located_use": None
                    if located is None
                    else {
                        "transaction_id": located.event_id,
                        "event_time": located.event_time,
                        "lat": located.lat,
                        "lon": located.lon,
                    },
                    "recent_transactions": len(card.velocity.tx),
                }
    if body is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no card with this token")
    return OrjsonResponse(body)
