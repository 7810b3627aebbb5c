"""POST /v1/transactions: the verdict for one authorization request (the POS data plane)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from api.deps import service_of
from api.models import TransactionRequest, TransactionResponse, ValidationErrorBody
from api.responses import JsonBytesResponse

router = APIRouter(prefix="/v1", tags=["transactions"])


@router.post(
    "/transactions",
    response_class=JsonBytesResponse,
    responses={
        200: {"model": TransactionResponse, "description": "The verdict."},
        422: {"model": ValidationErrorBody, "description": "Invalid body, field by field."},
    },
    summary="Decide on a card transaction",
)
async def post_transaction(tx: TransactionRequest, request: Request) -> JsonBytesResponse:
    """Approve, review or decline, with the score, the reasons and the evidence.

    Idempotent on `transaction_id`: a repeat gets the same body and is not published again.
    The decision is published to `cards.activity` with the card as token + last 4 digits.
    """
    return JsonBytesResponse(service_of(request).handle(tx))
