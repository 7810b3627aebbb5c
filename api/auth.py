"""The bearer-token check of control routes, shared by both routers.

The token is `app.state.control_token` (`STREAMSIM_API_TOKEN`, set by `api.main.create_app`).
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.errors import ErrorBody

_bearer = HTTPBearer(auto_error=False, description="STREAMSIM_API_TOKEN")
CHALLENGE = {"WWW-Authenticate": "Bearer"}

#: The statuses `require_token` adds to a route, for its OpenAPI `responses`.
TOKEN_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {
        "model": ErrorBody,
        "description": "No bearer token, or a wrong one (`WWW-Authenticate: Bearer`).",
        "headers": {"WWW-Authenticate": {"schema": {"type": "string"}, "description": "Bearer"}},
    },
    403: {"model": ErrorBody, "description": "Control routes disabled (no token set)."},
}


def require_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Control routes: `Authorization: Bearer <STREAMSIM_API_TOKEN>`; disabled when unset.

    No token sent: 401 with `WWW-Authenticate: Bearer` (whether or not one is set). A wrong
    token: 401 too. A token sent while control is disabled (no token set): 403.
    """
    expected: str | None = getattr(request.app.state, "control_token", None)
    if credentials is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing bearer token"
            if expected is not None
            else "missing bearer token; control routes are also disabled: start the API with "
            "STREAMSIM_API_TOKEN set",
            headers=CHALLENGE,
        )
    if expected is None:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            "control routes are disabled: start the API with STREAMSIM_API_TOKEN set",
        )
    if not secrets.compare_digest(credentials.credentials.encode(), expected.encode()):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "wrong bearer token", headers=CHALLENGE)


def has_token(request: Request) -> bool:
    """Whether the request carries the control token (read routes that show more with it)."""
    expected: str | None = getattr(request.app.state, "control_token", None)
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return (
        expected is not None
        and scheme.lower() == "bearer"
        and secrets.compare_digest(given.strip().encode(), expected.encode())
    )
