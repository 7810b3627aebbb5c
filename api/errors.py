"""Error bodies with every card number taken out.

- 422s in the FastAPI convention (`detail[]` of `loc`, `msg`, `type`, `input`, `ctx`): the
  `card_number` field's input is redacted wherever it appears (its own error, or a whole-body
  input), and any other PAN-like value is masked, in `loc` too (an unknown key is a key of
  the body).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel

from api.responses import OrjsonResponse
from core.pan import REDACTED, scrub, scrub_text

CARD_FIELD = "card_number"


class ErrorBody(BaseModel):
    """Any error but a request validation error: `detail` says what went wrong."""

    detail: Any


#: A route with a JSON body also answers 400 when the body cannot be read as text
#: (not UTF-8, for one).
BAD_BODY: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "A body that cannot be parsed (not UTF-8, ...)."}
}


def _redact_card_field(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: REDACTED if k == CARD_FIELD else _redact_card_field(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_card_field(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return value.decode("utf-8", "replace")
    return value


def _plain(value: Any) -> Any:
    """JSON-able: exceptions (in `ctx.error`) become their messages."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def safe_error(error: Mapping[str, Any]) -> dict[str, Any]:
    loc: Sequence[Any] = error.get("loc", ())
    out: dict[str, Any] = {
        "type": error.get("type"),
        "loc": [scrub(part) for part in loc],
        "msg": scrub_text(str(error.get("msg", ""))),
    }
    if "input" in error:
        value = error["input"]
        out["input"] = REDACTED if CARD_FIELD in loc else scrub(_plain(_redact_card_field(value)))
    if "ctx" in error:
        out["ctx"] = scrub(_plain(error["ctx"]))
    return out


def safe_errors(errors: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [safe_error(e) for e in errors]


async def validation_error_handler(request: Request, exc: Exception) -> OrjsonResponse:
    assert isinstance(exc, RequestValidationError)
    return OrjsonResponse({"detail": safe_errors(exc.errors())}, status_code=422)
