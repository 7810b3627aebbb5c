"""POST /v1/transactions: the verdict for one authorization request (the POS data plane).

Two shortcuts for the common case, a valid request sent as exactly `application/json`
(`plain_json`); anything else (an invalid or non-JSON body, another content type, an empty or
interrupted body, a body-size limit, FastAPI telemetry or a root path in effect) takes
FastAPI's own handler, so every 422 and 400 is exactly FastAPI's, and so is every accepted
request's model (the unit tests compare the paths on a fuzzed corpus):

- `TransactionRoute`, the route's handler: validates the raw bytes in one step
  (`TransactionRequest.model_validate_json`) instead of FastAPI's generic body handling
  (content-type parsing, `json.loads`, dependency solving, `validate_python`);
- `TransactionLane`, an ASGI middleware `api.main` installs just inside the latency
  middleware: does the same before Starlette's exception middleware and the routers, whose
  layers cost about a third of a request. It opens only once the route has answered a request
  of its app and found no dependency to run (app-, router- or route-level: the route says so
  in the request's scope, `LANE_OPEN`); until then, and for good if there is one, every
  request goes through FastAPI.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import fastapi.routing
import orjson
from fastapi import APIRouter, HTTPException, Request
from fastapi.routing import APIRoute
from fastapi.telemetry import get_telemetry_data
from pydantic import ValidationError
from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import BAD_BODY, ErrorBody
from api.fraud.deps import service_of
from api.fraud.durability import NotDurable
from api.fraud.models import TransactionRequest, TransactionResponse, ValidationErrorBody
from api.fraud.service import FraudService
from api.responses import JsonBytesResponse

PATH = "/v1/transactions"
#: Set in the request's scope by the route's handler: whether the lane may take its requests.
LANE_OPEN = "streamsim.transactions_lane"
_JSON = b"application/json"
_CONTENT_TYPE_JSON = (b"content-type", _JSON)


def plain_json(headers: list[tuple[bytes, bytes]]) -> bool:
    """One content-type header, exactly `application/json` (what POS clients send)."""
    found = False
    for name, value in headers:
        if name == b"content-type":
            if found or value != _JSON:
                return False
            found = True
    return found


def shortcut_allowed(scope: Scope) -> bool:
    return (
        plain_json(scope["headers"])
        and MAX_BODY_SIZE_SCOPE_KEY not in scope
        and get_telemetry_data() is None
    )


class TransactionRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        standard = super().get_route_handler()
        if self._dependencies():  # dependencies need FastAPI's solver

            async def solved(request: Request) -> Response:
                request.scope[LANE_OPEN] = False
                return await standard(request)

            return solved

        async def handler(request: Request) -> Response:
            scope = request.scope
            scope[LANE_OPEN] = True
            if not shortcut_allowed(scope):
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


class TransactionLane:
    """ASGI middleware: a valid POST /v1/transactions straight to the service (see above).

    Exceptions propagate as they would from the route (the latency middleware records a 500,
    Starlette's server-error middleware answers it). A request the lane does not take, or one
    whose body turns out not to be a valid request, goes to the app with its body replayed.
    """

    def __init__(self, app: ASGIApp, service: FraudService) -> None:
        self.app = app
        self.service = service
        self.open: bool | None = None  # None: not known until the route has answered once
        self.served = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] != PATH
            or scope["method"] != "POST"
            or scope.get("root_path")
            or not self.open
            or not shortcut_allowed(scope)
        ):
            try:
                await self.app(scope, receive, send)
            finally:
                if self.open is None and scope.get("path") == PATH and LANE_OPEN in scope:
                    self.open = bool(scope[LANE_OPEN])
            return
        messages: list[Message] = []
        chunks: list[bytes] = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":  # a disconnect: FastAPI's to handle
                await self.app(scope, _replay(messages, receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        try:
            tx = TransactionRequest.model_validate_json(b"".join(chunks))
        except ValidationError:
            await self.app(scope, _replay(messages, receive), send)
            return
        self.served += 1
        try:
            body = await self.service.answer(tx)
        except NotDurable as exc:
            response = not_durable(self.service, exc)
            await response(scope, receive, send)
            return
        # What JsonBytesResponse(body) sends, without building one per request.
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", b"%d" % len(body)), _CONTENT_TYPE_JSON],
            }
        )
        await send({"type": "http.response.body", "body": body})


def not_durable(service: FraudService, exc: NotDurable) -> JsonBytesResponse:
    """503 with Retry-After: the decision is taken (a retry gets it) but not yet durable."""
    return JsonBytesResponse(
        orjson.dumps({"detail": f"decision not durable yet ({exc}); retry"}),
        status_code=503,
        headers={"Retry-After": str(service.settings.retry_after_s)},
    )


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """`receive` that gives `messages` first, then the real ones."""
    pending = iter(messages)

    async def replayed() -> Message:
        for message in pending:
            return message
        return await receive()

    return replayed


router = APIRouter(prefix="/v1", tags=["transactions"], route_class=TransactionRoute)


@router.post(
    "/transactions",
    response_class=JsonBytesResponse,
    responses={
        200: {"model": TransactionResponse, "description": "The verdict."},
        **BAD_BODY,
        422: {"model": ValidationErrorBody, "description": "Invalid body, field by field."},
        429: {
            "model": ErrorBody,
            "description": "Shed: too many transactions in flight; retry after `Retry-After`.",
        },
        503: {
            "model": ErrorBody,
            "description": "The decision is not acknowledged by the broker yet (`durability: "
            "ack`); the retry after `Retry-After` gets it.",
        },
    },
    summary="Decide on a card transaction",
)
async def post_transaction(tx: TransactionRequest, request: Request) -> JsonBytesResponse:
    """Approve, review or decline, with the score, the reasons and the evidence.

    Idempotent on `transaction_id`: a repeat gets the same body and is not published again.
    The decision is published to `cards.activity` with the card as token + last 4 digits;
    under `durability: ack` (the default) the answer leaves once the broker acknowledged it.
    """
    service = service_of(request)
    try:
        return JsonBytesResponse(await service.answer(tx))
    except NotDurable as exc:
        return not_durable(service, exc)
