"""Scenario runs: start and stop (control, bearer token), list them (read).

- `POST /v1/control/runs` -> 201 the run (simulator, Spark job, and endpoint in POS mode, or
  the `components` asked for); 404 unknown scenario; 409 one already running; 422 a bad body,
  a bad override (the key is named) or a component the scenario does not have; 503 when the
  job's input cannot be read (Kafka down).
- `PATCH /v1/control/runs/{run_id}/pacing` -> the run, its `speed` and/or `max_rate` changed
  live; 409 when it is not running. (A path of its own: one route per path keeps a 405's
  `Allow` header exact.)
- `DELETE /v1/control/runs/{run_id}` -> the run, once every component stopped: simulator,
  job (once drained), endpoint; each its stop signal (the job: SIGINT), then SIGKILL.
- `GET /v1/runs`, `GET /v1/runs/{run_id}`: open.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request, status

from api.auth import TOKEN_RESPONSES, has_token, require_token
from api.errors import BAD_BODY, safe_errors
from api.panel.deps import RUNS_UNAVAILABLE
from api.panel.deps import runs_of as _runs_of
from api.panel.models.runs import ErrorBody, RunInfo, RunList, RunRequest, RunTuning
from api.responses import OrjsonResponse
from core.config import ConfigError
from runs.components import InvalidComponents
from runs.manager import (
    RunConflict,
    RunManager,
    RunNotActive,
    RunUnavailable,
    UnknownRun,
    UnknownScenario,
)
from runs.overrides import InvalidOverrides

router = APIRouter(tags=["runs"])


def runs_of(request: Request) -> RunManager:
    """The app's run manager, reading its jobs' progress from the app's metrics feed."""
    manager = _runs_of(request)
    feeds = getattr(request.app.state, "feeds", None)
    if manager.progress is None and feeds is not None:
        manager.progress = feeds.progress
    return manager


@router.post(
    "/v1/control/runs",
    status_code=status.HTTP_201_CREATED,
    dependencies=[Depends(require_token)],
    response_class=OrjsonResponse,
    responses={
        201: {"model": RunInfo, "description": "Started."},
        **BAD_BODY,
        **TOKEN_RESPONSES,
        404: {"model": ErrorBody, "description": "No such scenario."},
        409: {"model": ErrorBody, "description": "The scenario is already running."},
        422: {
            "model": ErrorBody,
            "description": "Invalid body, overrides (key by key) or components.",
        },
        **RUNS_UNAVAILABLE,
    },
    summary="Start a scenario run",
)
def start_run(body: RunRequest, request: Request) -> OrjsonResponse:
    """Runs `streamsim simulate` into Kafka with the overrides merged over the scenario file,
    the scenario's Spark job on the run's own checkpoints, and in POS mode the fraud endpoint
    the simulator posts to. 503 (run control not set up, or Kafka unreachable for the job)."""
    manager = runs_of(request)
    try:
        run = manager.start(
            body.scenario,
            speed=body.speed,
            duration_s=body.duration_s,
            seed=body.seed,
            overrides=body.overrides,
            components=body.components,
        )
    except UnknownScenario as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    except RunConflict as exc:
        raise HTTPException(
            status.HTTP_409_CONFLICT, {"message": str(exc), "run_id": exc.run.run_id}
        ) from None
    except InvalidOverrides as exc:
        detail = [{**p, "loc": ["body", "overrides", *p["loc"]]} for p in exc.problems]
        return OrjsonResponse({"detail": safe_errors(detail)}, status_code=422)
    except InvalidComponents as exc:
        detail = [{"loc": ["body", "components"], "msg": str(exc), "type": "invalid_components"}]
        return OrjsonResponse({"detail": safe_errors(detail)}, status_code=422)
    except RunUnavailable as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc)) from None
    except ConfigError as exc:  # the scenario file itself cannot be read
        detail = [{"loc": ["body", "scenario"], "msg": str(exc), "type": "invalid_scenario_file"}]
        return OrjsonResponse({"detail": safe_errors(detail)}, status_code=422)
    return OrjsonResponse(run.to_dict(), status_code=status.HTTP_201_CREATED)


@router.patch(
    "/v1/control/runs/{run_id}/pacing",
    dependencies=[Depends(require_token)],
    response_class=OrjsonResponse,
    responses={
        200: {"model": RunInfo, "description": "Sent to the run, which applies it within 1 s."},
        **BAD_BODY,
        **TOKEN_RESPONSES,
        404: {"model": ErrorBody, "description": "No such run."},
        409: {"model": ErrorBody, "description": "The run is not running."},
        **RUNS_UNAVAILABLE,
    },
    summary="Change a running run's speed or rate cap",
)
def retune_run(run_id: str, body: RunTuning, request: Request) -> OrjsonResponse:
    """The simulator polls its control file and paces what it has not sent yet at the new
    values; the simulated time it has reached stays put."""
    try:
        run = runs_of(request).retune(run_id, body.changes())
    except UnknownRun as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    except RunNotActive as exc:
        raise HTTPException(
            status.HTTP_409_CONFLICT, {"message": str(exc), "run_id": exc.run.run_id}
        ) from None
    return OrjsonResponse(run.to_dict())


@router.delete(
    "/v1/control/runs/{run_id}",
    dependencies=[Depends(require_token)],
    response_class=OrjsonResponse,
    responses={
        200: {"model": RunInfo, "description": "Stopped (or had already ended)."},
        **TOKEN_RESPONSES,
        404: {"model": ErrorBody, "description": "No such run."},
        **RUNS_UNAVAILABLE,
    },
    summary="Stop a run",
)
def stop_run(run_id: str, request: Request) -> OrjsonResponse:
    """Simulator first (SIGTERM: it flushes what it holds to Kafka), then the job once it
    drained what was sent (or after a timeout), then the endpoint; each SIGKILLed (its whole
    process group) if it does not end in time."""
    try:
        run = runs_of(request).stop(run_id)
    except UnknownRun as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    return OrjsonResponse(run.to_dict())


@router.get(
    "/v1/runs",
    response_class=OrjsonResponse,
    responses={200: {"model": RunList}, **RUNS_UNAVAILABLE},
    tags=["read"],
)
def list_runs(request: Request) -> OrjsonResponse:
    """Runs started by this API process, newest first (the last 100). Stderr tails, working
    directories and overrides only with the control token."""
    private = has_token(request)
    return OrjsonResponse({"runs": [r.to_dict(private=private) for r in runs_of(request).list()]})


@router.get(
    "/v1/runs/{run_id}",
    response_class=OrjsonResponse,
    responses={
        200: {"model": RunInfo},
        404: {"model": ErrorBody, "description": "No such run."},
        **RUNS_UNAVAILABLE,
    },
    tags=["read"],
)
def get_run(run_id: str, request: Request) -> OrjsonResponse:
    try:
        run = runs_of(request).get(run_id)
        return OrjsonResponse(run.to_dict(private=has_token(request)))
    except UnknownRun as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
