"""GET /v1/health (and /health): Kafka connectivity, state rebuild, publish failures."""

from __future__ import annotations

from fastapi import APIRouter, Request

from api.fraud.deps import service_of
from api.fraud.models import Health
from api.responses import OrjsonResponse

router = APIRouter(tags=["read"])


@router.get("/v1/health", response_class=OrjsonResponse, responses={200: {"model": Health}})
@router.get("/health", response_class=OrjsonResponse, include_in_schema=False)
def health(request: Request) -> OrjsonResponse:
    """`ok` when Kafka answers and the state is live; `degraded` otherwise (the endpoint still
    decides while degraded). Always 200, so a load balancer keeps sending traffic; read
    `status`. Runs in the thread pool: the Kafka probe may wait up to a second."""
    service = service_of(request)
    connected = service.publisher.connected()
    state = service.state_stats()
    publish = service.publisher.counters()
    live = state["status"] in ("live", "disabled")
    updater_error = None if service.updater is None else service.updater.last_error
    error = publish["last_error"] or updater_error
    return OrjsonResponse(
        {
            "status": "ok" if connected and live else "degraded",
            "kafka": {
                "connected": connected,
                "bootstrap": "" if service.stack is None else service.stack.kafka.bootstrap_servers,
                "error": None if connected else error,
            },
            "state": state,
            "publish": publish,
        }
    )
