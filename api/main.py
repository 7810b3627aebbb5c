"""The app factory: `create_app(service)`, or `app_from_config(...)` for the `streamsim api`
command. By default one app mounts both routers: the fraud endpoint's (`api.fraud.routes`) and
the control panel's (`api.panel.routes`). `services="fraud"` mounts only the endpoint's (no
panel consumers share its interpreter); `services="panel"` only the panel's (its fraud service
is never started: no decisions, no publisher, no state). Neither package imports the other:
this module composes them.

Routes:
- `POST /v1/transactions`: the verdict (open on localhost: the POS data plane);
- `GET /v1/cards/{token}/last-use`, `GET /v1/stats`, `GET /v1/health`: read API (open);
- `POST /v1/control/stats/reset`: control (bearer token);
- `POST /v1/control/runs`, `DELETE /v1/control/runs/{id}`: scenario runs (bearer token);
  `GET /v1/runs`, `GET /v1/scenarios` (open);
- `POST /v1/control/runs/{id}/evaluation`: score a run against truth (bearer token);
  `GET /v1/runs/{id}/evaluation`, `GET /v1/evaluations/runs` (open);
- `POST /v1/control/loadtests`, `DELETE /v1/control/loadtests/{id}`: load tests (bearer
  token); `GET /v1/loadtests/files`, `/v1/loadtests/runs[/{id}]` (open);
- `GET /v1/alerts`, `/v1/activity/recent`, `/v1/pipeline`, `/v1/rates`,
  `/v1/evaluations/latest`: read API for the control panel (open);
- `GET /v1/vehicles`, `/v1/vehicles/{vehicle_id}/telemetry`: the fleet for the Vehicles page
  (open);
- `GET /v1/shipping/containers`, `/v1/shipping/containers/{container_id}`: a customer's own
  containers (owner token, `core.config.owner_tokens`);
- `GET /v1/shipping/fleet`, `/v1/shipping/alerts`: ships, ports, the backlog on board and the
  shipping alerts for the Shipping page (open; no container ids or owners);
- `GET /v1/sensors`, `/v1/sensors/{sensor_id}/series`, `/v1/sensors/alerts`: a sensors
  run's devices, series and alerts for the Sensors page (open);
- `/docs`, `/openapi.json`: OpenAPI.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Literal

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError

from api.errors import validation_error_handler
from api.fraud.publisher import MemoryPublisher
from api.fraud.routes import ROUTERS as FRAUD_ROUTERS
from api.fraud.routes.transactions import TransactionLane
from api.fraud.service import FraudService
from api.fraud.settings import load_secrets, load_settings, run_settings
from api.fraud.shedding import LoadShedder
from api.fraud.stats import LatencyMiddleware
from api.panel.routes import ROUTERS as PANEL_ROUTERS
from api.panel.routes import loadtests as loadtest_routes
from api.responses import OrjsonResponse
from core.config import StackConfig
from core.config.owner_tokens import OwnerTokens, load_owner_tokens
from live.consumers.feeds import Feeds
from live.consumers.sensors import SensorFeed
from live.consumers.shipping import ShippingTail
from live.views.ships import ShipsView
from runs.evaluations import RunEvaluations
from runs.loadtests import LoadTestManager
from runs.manager import RunManager

#: What one `streamsim api` process serves.
Services = Literal["all", "fraud", "panel"]

#: What FastAPI's `lifespan` takes: the app -> an async context around its life.
Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def create_app(
    service: FraudService,
    *,
    run_manager: RunManager | None = None,
    feed: Feeds | None = None,
    evaluations_dir: Path | None = None,
    owner_tokens: OwnerTokens | None = None,
    shipping: ShippingTail | None = None,
    loadtests: LoadTestManager | None = None,
    sensors: SensorFeed | None = None,
    services: Services = "all",
) -> FastAPI:
    """With a stack, runs, feeds and evaluations default to the stack's (None: without).
    Owner tokens default to the environment's (validated here). With a stack, the shipping
    feed runs: for the fleet (open) and, with owner tokens, the owner-scoped routes; and the
    sensor feed, for the Sensors page. `services`: see above."""
    if services == "fraud":
        return _fraud_app(service)
    stack = service.stack
    owner_tokens = owner_tokens or load_owner_tokens(service.secrets.api_token)
    fraud = services == "all"
    if shipping is None and stack is not None:
        shipping = ShippingTail(stack, fleet=ShipsView())
    if sensors is None and stack is not None:
        sensors = SensorFeed(stack)
    if stack is not None:
        run_manager = run_manager or RunManager.for_stack(stack, endpoint_settings=run_settings)
        feed = feed or Feeds(stack, service.settings.topic)
        evaluations_dir = evaluations_dir or Path(stack.dirs.data) / "evaluations"
        loadtests = loadtests or LoadTestManager.for_stack(stack)
    evaluations = RunEvaluations(run_manager) if run_manager is not None else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if fraud:
            await service.start()
        if feed is not None:
            feed.start()
        if shipping is not None:
            shipping.start()
        if sensors is not None:
            sensors.start()
        try:
            yield
        finally:
            if shipping is not None:
                await asyncio.to_thread(shipping.stop)
            if sensors is not None:
                await asyncio.to_thread(sensors.stop)
            if evaluations is not None:
                evaluations.close()
            if run_manager is not None:
                await asyncio.to_thread(run_manager.close)
            if loadtests is not None:
                await asyncio.to_thread(loadtests.close)
            if feed is not None:
                await asyncio.to_thread(feed.stop)
            if fraud:
                await service.stop()

    app = _base_app(service, lifespan)
    app.state.runs = run_manager
    app.state.evaluations = evaluations
    app.state.feeds = feed
    app.state.evaluations_dir = evaluations_dir
    app.state.owner_tokens = owner_tokens
    app.state.shipping = shipping
    app.state.sensors = sensors
    app.state.loadtests = loadtests
    for router in (*(FRAUD_ROUTERS if fraud else ()), *PANEL_ROUTERS, loadtest_routes.router):
        app.include_router(router)
    if fraud:
        _fraud_middleware(app, service)
    return app


def _fraud_app(service: FraudService) -> FastAPI:
    """The fraud endpoint alone: its routes, middleware and service."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    app = _base_app(service, lifespan)
    for router in FRAUD_ROUTERS:
        app.include_router(router)
    _fraud_middleware(app, service)
    return app


def _base_app(service: FraudService, lifespan: Lifespan) -> FastAPI:
    """The app every service shape starts from: its metadata, the fraud service and control
    token in its state, and the 422 handler."""
    app = FastAPI(
        title="streamsim fraud endpoint",
        version="1",
        summary="Card-transaction verdicts in milliseconds, published to cards.activity.",
        default_response_class=OrjsonResponse,
        lifespan=lifespan,
    )
    app.state.service = service
    app.state.control_token = service.secrets.api_token
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    return app


def _fraud_middleware(app: FastAPI, service: FraudService) -> None:
    # Inside the latency middleware, so lane requests are timed and counted like the rest.
    app.add_middleware(TransactionLane, service=service)
    app.add_middleware(LatencyMiddleware, stats=service.stats)
    # Outermost: a shed request costs no body read, no timing, no decision.
    app.add_middleware(
        LoadShedder,
        stats=service.stats,
        limit=service.settings.max_in_flight,
        retry_after_s=service.settings.retry_after_s,
    )


def app_from_config(
    stack: StackConfig,
    settings_file: str | Path | None = None,
    *,
    services: Services = "all",
    instance: int | None = None,
) -> FastAPI:
    """The app for a stack: Kafka from the stack, settings from `settings_file`, secrets from
    the environment. `instance`: this process's index among several endpoint instances on
    one port (its own write-ahead log directory)."""
    settings = load_settings(settings_file)
    if services == "panel":  # the service is never started: nothing to publish or log
        settings = settings.model_copy(update={"durability": "none"})
        service = FraudService(settings, load_secrets(stack), stack, publisher=MemoryPublisher())
    else:
        service = FraudService(settings, load_secrets(stack), stack, instance=instance)
    return create_app(service, services=services)
