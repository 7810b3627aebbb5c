"""JSON responses rendered with orjson (FastAPI's own ORJSONResponse is deprecated)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response


class OrjsonResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


class JsonBytesResponse(Response):
    """A body that is already JSON bytes (a verdict, rendered once and cached)."""

    media_type = "application/json"
