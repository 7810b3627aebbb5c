"""JSON responses rendered with orjson (FastAPI's own ORJSONResponse is deprecated).

Both are `JSONResponse`s, so the OpenAPI document takes each route's response model as the body
schema (another response class makes FastAPI publish `{"type": "string"}` beside it).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import JSONResponse


class OrjsonResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


class JsonBytesResponse(JSONResponse):
    """A body that is already JSON bytes (a verdict, rendered once and cached)."""

    def render(self, content: Any) -> bytes:
        assert isinstance(content, bytes), "JsonBytesResponse takes rendered JSON bytes"
        return content
