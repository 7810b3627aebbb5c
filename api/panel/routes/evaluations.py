"""Evaluations: the newest `streamsim evaluate` report, and evaluating a panel run on request.

- `GET /v1/evaluations/latest` (open): the newest report in `<dirs.data>/evaluations/`.
- `POST /v1/control/runs/{run_id}/evaluation` (control token) -> 202 the evaluation, scored
  now (a finished run) or once the run finishes (a running one); 404 no such run; 409 the run
  was stopped or failed, or is being evaluated; 422 a malformed run id, or a scenario with
  nothing to score.
- `GET /v1/runs/{run_id}/evaluation` (open): its status and, once done, its report; 404 when
  the run has not been evaluated.
- `GET /v1/evaluations/runs` (open): every run's evaluation with the run's knobs, newest first
  (the run-to-run comparison). Overrides and errors only with the control token, as runs'.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request, status
from fastapi import Path as PathParam

from api.auth import TOKEN_RESPONSES, has_token, require_token
from api.errors import safe_errors
from api.panel.deps import RUNS_UNAVAILABLE, evaluations_of
from api.panel.models.evaluations import RunEvaluation, RunEvaluationList
from api.panel.models.feeds import Evaluation
from api.panel.models.runs import ErrorBody
from api.responses import OrjsonResponse
from live.views.evaluations import latest_evaluation
from runs.evaluations import (
    EvaluationBusy,
    NotEvaluable,
    RunNotScorable,
    UnknownEvaluation,
    UnknownRun,
)

router = APIRouter(prefix="/v1", tags=["read"])

#: A run id as `POST /v1/control/runs` makes them: `<scenario>-<yyyymmdd>-<hhmmss>-<hex>`.
RunId = Annotated[
    str,
    PathParam(
        min_length=1,
        max_length=160,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="A run id from GET /v1/runs.",
    ),
]
MALFORMED: dict[int | str, dict[str, object]] = {
    422: {"model": ErrorBody, "description": "A malformed run id."}
}


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


@router.post(
    "/control/runs/{run_id}/evaluation",
    status_code=status.HTTP_202_ACCEPTED,
    dependencies=[Depends(require_token)],
    response_class=OrjsonResponse,
    responses={
        202: {"model": RunEvaluation, "description": "Under way (or waiting for the run)."},
        **TOKEN_RESPONSES,
        404: {"model": ErrorBody, "description": "No such run."},
        409: {
            "model": ErrorBody,
            "description": "The run was stopped or failed (no run record to score), or an "
            "evaluation of it is under way.",
        },
        422: {
            "model": ErrorBody,
            "description": "A malformed run id, or a scenario with nothing to score.",
        },
        **RUNS_UNAVAILABLE,
    },
    tags=["runs"],
    summary="Evaluate a run against truth",
)
def evaluate_run(run_id: RunId, request: Request) -> OrjsonResponse:
    """`streamsim evaluate` on the run's own records (its event-id prefix), its stack, job
    config and endpoint settings; the report and the run's knobs are kept in the run's
    directory. A running run is scored once it finished."""
    try:
        found = evaluations_of(request).start(run_id)
    except UnknownRun as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    except (RunNotScorable, EvaluationBusy) as exc:
        raise HTTPException(
            status.HTTP_409_CONFLICT, {"message": str(exc), "run_id": run_id}
        ) from None
    except NotEvaluable as exc:
        detail = [{"loc": ["path", "run_id"], "msg": str(exc), "type": "not_evaluable"}]
        return OrjsonResponse({"detail": safe_errors(detail)}, status_code=422)
    return OrjsonResponse(found.to_dict(), status_code=status.HTTP_202_ACCEPTED)


@router.get(
    "/runs/{run_id}/evaluation",
    response_class=OrjsonResponse,
    responses={
        200: {"model": RunEvaluation},
        404: {"model": ErrorBody, "description": "No such run, or not evaluated yet."},
        **MALFORMED,
        **RUNS_UNAVAILABLE,
    },
)
def run_evaluation(run_id: RunId, request: Request) -> OrjsonResponse:
    """The run's latest evaluation: its status, and its report once done."""
    try:
        found = evaluations_of(request).get(run_id)
    except (UnknownRun, UnknownEvaluation) as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    return OrjsonResponse(found.to_dict(private=has_token(request)))


@router.get(
    "/evaluations/runs",
    response_class=OrjsonResponse,
    responses={200: {"model": RunEvaluationList}, **RUNS_UNAVAILABLE},
)
def run_evaluations(request: Request) -> OrjsonResponse:
    """Every run evaluation with the run's knobs, newest first (the last 100): what the
    panel's run-to-run comparison tabulates."""
    private = has_token(request)
    found = evaluations_of(request).list()
    return OrjsonResponse({"evaluations": [e.to_dict(private=private) for e in found]})
