"""GET /v1/scenarios: the scenario files a run can start from (read, open)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from api.panel.deps import RUNS_UNAVAILABLE, runs_of
from api.panel.models.runs import ScenarioList
from api.responses import OrjsonResponse

router = APIRouter(tags=["runs"])


@router.get(
    "/v1/scenarios",
    response_class=OrjsonResponse,
    responses={200: {"model": ScenarioList}, **RUNS_UNAVAILABLE},
    tags=["read"],
)
def list_scenarios(request: Request) -> OrjsonResponse:
    """The scenario files a run can start from, resolved (what the UI builds its sliders from)."""
    return OrjsonResponse({"scenarios": runs_of(request).scenarios()})
