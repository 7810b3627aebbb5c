"""Load tests from the panel: start and stop (control, bearer token), files and reports (read).

- `GET /v1/loadtests/files` -> each file under `config/loadtests/` with the part the panel may
  edit, and the keys `edits` may set;
- `POST /v1/control/loadtests` -> 201 the run (`streamsim loadtest` in a child process); 404
  unknown file; 409 one already running; 422 an edit off the allow-list or a bad value (the key
  is named);
- `GET /v1/loadtests/runs` -> every run, earlier reports included (the CLI's too), newest first,
  with its live figures or its summary; `GET /v1/loadtests/runs/{run_id}` adds the whole report
  and its Vega-Lite charts;
- `DELETE /v1/control/loadtests/{run_id}` -> the run, stopped.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request, status

from api.auth import TOKEN_RESPONSES, has_token, require_token
from api.errors import BAD_BODY, ErrorBody, safe_errors
from api.panel.deps import LOADTESTS_UNAVAILABLE, loadtests_of
from api.panel.models.loadtests import LoadTestFiles, LoadTestInfo, LoadTestList, LoadTestRequest
from api.responses import OrjsonResponse
from runs.loadtests import InvalidEdits, LoadTestConflict, UnknownLoadTest

router = APIRouter(tags=["loadtests"])


@router.get(
    "/v1/loadtests/files",
    response_class=OrjsonResponse,
    responses={200: {"model": LoadTestFiles}, **LOADTESTS_UNAVAILABLE},
    tags=["read"],
)
def list_files(request: Request) -> OrjsonResponse:
    """The load-test files a run can start from, with the part the panel may edit."""
    manager = loadtests_of(request)
    return OrjsonResponse({"files": manager.describe_files(), "tunable": manager.tunable()})


@router.post(
    "/v1/control/loadtests",
    status_code=status.HTTP_201_CREATED,
    dependencies=[Depends(require_token)],
    response_class=OrjsonResponse,
    responses={
        201: {"model": LoadTestInfo, "description": "Started."},
        **BAD_BODY,
        **TOKEN_RESPONSES,
        404: {"model": ErrorBody, "description": "No such load-test file."},
        409: {"model": ErrorBody, "description": "A load test is already running."},
        422: {"model": ErrorBody, "description": "Invalid body or edits (key by key)."},
        **LOADTESTS_UNAVAILABLE,
    },
    summary="Start a load test",
)
def start_loadtest(body: LoadTestRequest, request: Request) -> OrjsonResponse:
    """Runs `streamsim loadtest` on the file with the edits merged over it; its figures so far
    show in GET /v1/loadtests/runs/{run_id} about once a second."""
    manager = loadtests_of(request)
    try:
        run = manager.start(body.file, body.edits)
    except UnknownLoadTest as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    except LoadTestConflict as exc:
        raise HTTPException(
            status.HTTP_409_CONFLICT, {"message": str(exc), "run_id": exc.run.run_id}
        ) from None
    except InvalidEdits as exc:
        detail = [{**p, "loc": ["body", "edits", *p["loc"]]} for p in exc.problems]
        return OrjsonResponse({"detail": safe_errors(detail)}, status_code=422)
    return OrjsonResponse(run.to_dict(private=True), status_code=status.HTTP_201_CREATED)


@router.delete(
    "/v1/control/loadtests/{run_id}",
    dependencies=[Depends(require_token)],
    response_class=OrjsonResponse,
    responses={
        200: {"model": LoadTestInfo, "description": "Stopped (or had already ended)."},
        **TOKEN_RESPONSES,
        404: {"model": ErrorBody, "description": "No such load test run."},
        **LOADTESTS_UNAVAILABLE,
    },
    summary="Stop a load test",
)
def stop_loadtest(run_id: str, request: Request) -> OrjsonResponse:
    try:
        run = loadtests_of(request).stop(run_id)
    except UnknownLoadTest as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    return OrjsonResponse(run.to_dict(private=True))


@router.get(
    "/v1/loadtests/runs",
    response_class=OrjsonResponse,
    responses={200: {"model": LoadTestList}, **LOADTESTS_UNAVAILABLE},
    tags=["read"],
)
def list_loadtests(request: Request) -> OrjsonResponse:
    """Every load test with a report folder: live figures while one runs, then its summary.
    A failed run's stderr tail only with the control token."""
    private = has_token(request)
    runs = loadtests_of(request).list()
    return OrjsonResponse({"runs": [r.to_dict(private=private) for r in runs]})


@router.get(
    "/v1/loadtests/runs/{run_id}",
    response_class=OrjsonResponse,
    responses={
        200: {"model": LoadTestInfo},
        404: {"model": ErrorBody, "description": "No such load test run."},
        **LOADTESTS_UNAVAILABLE,
    },
    tags=["read"],
)
def get_loadtest(run_id: str, request: Request) -> OrjsonResponse:
    """One run with its whole report and its Vega-Lite chart specs."""
    try:
        run = loadtests_of(request).get(run_id)
    except UnknownLoadTest as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    return OrjsonResponse(run.to_dict(detail=True, private=has_token(request)))
