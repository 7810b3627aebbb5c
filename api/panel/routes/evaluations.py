"""GET /v1/evaluations/latest: the newest evaluation report (read, open)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException, Request, status

from api.panel.models.feeds import Evaluation
from api.panel.models.runs import ErrorBody
from api.panel.views.evaluations import latest_evaluation
from api.responses import OrjsonResponse

router = APIRouter(prefix="/v1", tags=["read"])


@router.get(
    "/evaluations/latest",
    response_class=OrjsonResponse,
    responses={
        200: {"model": Evaluation},
        404: {"model": ErrorBody, "description": "No evaluation yet."},
    },
)
def evaluation(request: Request) -> OrjsonResponse:
    """The newest report in `<dirs.data>/evaluations/` (written by `streamsim evaluate`)."""
    directory: Path | None = getattr(request.app.state, "evaluations_dir", None)
    found = None if directory is None else latest_evaluation(directory)
    if found is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            f"no evaluation yet in {directory}: run `streamsim evaluate SCENARIO`",
        )
    return OrjsonResponse(found)
