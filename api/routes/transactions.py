"""POST /v1/transactions: the verdict for one authorization request (the POS data plane).

The route's handler (`TransactionRoute`) takes a shortcut in the common case, a valid request
sent as `application/json`: it validates the raw bytes in one step
(`TransactionRequest.model_validate_json`) instead of FastAPI's generic body handling
(content-type parsing, `json.loads`, dependency solving, then `validate_python`), which cost
about as much as deciding. Anything else (an invalid or non-JSON body, another content type,
an empty body, a body-size limit or FastAPI telemetry in effect) takes FastAPI's own handler,
so every 422 and 400 is exactly FastAPI's, and so is every accepted request's model (the
unit tests compare both paths on a fuzzed corpus).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import fastapi.routing
from fastapi import APIRouter, HTTPException, Request
from fastapi.routing import APIRoute
from fastapi.telemetry import get_telemetry_data
from pydantic import ValidationError
from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY
from starlette.responses import Response

from api.deps import service_of
from api.models import TransactionRequest, TransactionResponse, ValidationErrorBody
from api.responses import JsonBytesResponse

_JSON = b"application/json"


def plain_json(headers: list[tuple[bytes, bytes]]) -> bool:
    """One content-type header, exactly `application/json` (what POS clients send)."""
    found = False
    for name, value in headers:
        if name == b"content-type":
            if found or value != _JSON:
                return False
            found = True
    return found


class TransactionRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        standard = super().get_route_handler()
        if self._dependencies():  # dependencies need FastAPI's solver
            return standard

        async def handler(request: Request) -> Response:
            scope = request.scope
            if (
                not plain_json(scope["headers"])
                or MAX_BODY_SIZE_SCOPE_KEY in scope
                or get_telemetry_data() is not None
            ):
                return await standard(request)
            try:
                body = await request.body()
            except Exception as exc:  # what FastAPI's handler does without a body-size limit
                raise HTTPException(400, "There was an error parsing the body") from exc
            try:
                tx = TransactionRequest.model_validate_json(body)
            except ValidationError:
                return await standard(request)  # it reads the body cached on the request
            return await post_transaction(tx, request)

        return handler

    def _dependencies(self) -> list[Any]:
        """The route's dependencies, app- and router-level ones included when FastAPI builds
        the handler of an included route (a private context variable of fastapi.routing;
        without it, the route's own)."""
        var = getattr(fastapi.routing, "_effective_route_context_var", None)
        context: Any = var.get() if var is not None else None
        if context is not None and getattr(context, "original_route", None) is self:
            return list(context.dependant.dependencies)
        return list(self.dependant.dependencies)


router = APIRouter(prefix="/v1", tags=["transactions"], route_class=TransactionRoute)


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
