"""The app factory: `create_app(service)`, or `app_from_config(...)` for the `streamsim api`
command.

Routes:
- `POST /v1/transactions`: the verdict (open on localhost: the POS data plane);
- `GET /v1/cards/{token}/last-use`, `GET /v1/stats`, `GET /v1/health`: read API (open);
- `POST /v1/control/stats/reset`: control (bearer token);
- `/docs`, `/openapi.json`: OpenAPI.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError

from api.errors import validation_error_handler
from api.responses import OrjsonResponse
from api.routes import cards, control, health, stats, transactions
from api.service import FraudService
from api.settings import load_secrets, load_settings
from api.stats import LatencyMiddleware
from streamsim.config import StackConfig


def create_app(service: FraudService) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    app = FastAPI(
        title="streamsim fraud endpoint",
        version="1",
        summary="Card-transaction verdicts in milliseconds, published to cards.activity.",
        default_response_class=OrjsonResponse,
        lifespan=lifespan,
    )
    app.state.service = service
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    for module in (transactions, cards, stats, health, control):
        app.include_router(module.router)
    app.add_middleware(LatencyMiddleware, stats=service.stats)
    return app


def app_from_config(stack: StackConfig, settings_file: str | Path | None = None) -> FastAPI:
    """The app for a stack: Kafka from the stack, settings from `settings_file`, secrets from
    the environment."""
    service = FraudService(load_settings(settings_file), load_secrets(stack), stack)
    return create_app(service)
