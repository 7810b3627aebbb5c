"""The bearer-token check of control routes, shared by both routers.

The token is `app.state.control_token` (`STREAMSIM_API_TOKEN`, set by `api.main.create_app`).
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

_bearer = HTTPBearer(auto_error=False, description="STREAMSIM_API_TOKEN")


def require_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Control routes: `Authorization: Bearer <STREAMSIM_API_TOKEN>`; disabled when unset."""
    expected: str | None = getattr(request.app.state, "control_token", None)
    if expected is None:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            "control routes are disabled: start the API with STREAMSIM_API_TOKEN set",
        )
    given = "" if credentials is None else credentials.credentials
    if not secrets.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing or wrong bearer token",
            headers={"WWW-Authenticate": "Bearer"},
        )
