"""What the panel routes share: the app's feeds, run manager, run evaluations and load tests,
and the 503 they answer without them; the owner of an owner token (`require_owner`, the
tokens from `core.config.owner_tokens`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.auth import CHALLENGE
from api.errors import ErrorBody
from core.config.owner_tokens import TOKENS_ENV, TOKENS_FILE_ENV, OwnerTokens
from live.consumers.feeds import Feeds
from runs.evaluations import RunEvaluations
from runs.loadtests import LoadTestManager
from runs.manager import RunManager


def feeds_of(request: Request) -> Feeds:
    feeds: Feeds | None = getattr(request.app.state, "feeds", None)
    if feeds is None:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, "feeds need Kafka: this API runs without a stack"
        )
    return feeds


def runs_of(request: Request) -> RunManager:
    runs: RunManager | None = getattr(request.app.state, "runs", None)
    if runs is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "run control is not set up")
    return runs


def evaluations_of(request: Request) -> RunEvaluations:
    """The evaluations of the app's runs (503 without run control, as the runs)."""
    runs_of(request)
    found: RunEvaluations | None = getattr(request.app.state, "evaluations", None)
    if found is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "run control is not set up")
    return found


def loadtests_of(request: Request) -> LoadTestManager:
    manager: LoadTestManager | None = getattr(request.app.state, "loadtests", None)
    if manager is None:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, "load tests need a stack: this API runs without"
        )
    return manager


UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorBody, "description": "No Kafka configured."}
}
RUNS_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorBody, "description": "Run control is not set up."}
}
LOADTESTS_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorBody, "description": "Load tests are not set up (no stack)."}
}

_bearer = HTTPBearer(
    scheme_name="OwnerToken",
    auto_error=False,
    description="An owner token (STREAMSIM_OWNER_TOKENS_FILE or STREAMSIM_OWNER_TOKENS)",
)

#: The statuses `require_owner` adds to a route, for its OpenAPI `responses`.
OWNER_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {
        "model": ErrorBody,
        "description": "No bearer token, or one that is no owner's (`WWW-Authenticate: Bearer`).",
        "headers": {"WWW-Authenticate": {"schema": {"type": "string"}, "description": "Bearer"}},
    },
    403: {"model": ErrorBody, "description": "Owner routes disabled (no owner tokens set)."},
}


def require_owner(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The owner the bearer token belongs to. No token: 401 with `WWW-Authenticate: Bearer`;
    one that is no owner's: 401 too; a token while owner routes are disabled: 403."""
    tokens: OwnerTokens | None = getattr(request.app.state, "owner_tokens", None)
    if credentials is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing bearer token (an owner token)"
            if tokens is not None
            else f"missing bearer token; owner routes are also disabled: start the API with "
            f"{TOKENS_FILE_ENV} or {TOKENS_ENV} set",
            headers=CHALLENGE,
        )
    if tokens is None:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            f"owner routes are disabled: start the API with {TOKENS_FILE_ENV} or {TOKENS_ENV} set",
        )
    owner = tokens.owner_of(credentials.credentials)
    if owner is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "not an owner token", headers=CHALLENGE)
    return owner
