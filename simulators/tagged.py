"""Tagged unions (a `type` key picks the model) whose validation errors name real key paths.

Pydantic puts the tag into an error's location (`delay_s.uniform.high`); a YAML author wrote
`delay_s.high`, so `untagged(...)` strips it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError, ValidatorFunctionWrapHandler, WrapValidator


def untagged(tags: tuple[str, ...]) -> WrapValidator:
    tag_set = set(tags)

    def strip(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError as exc:
            errors: list[Any] = []
            for err in exc.errors(include_url=False):
                loc = tuple(err["loc"])
                if loc and loc[0] in tag_set:
                    loc = loc[1:]
                detail = {"type": err["type"], "loc": loc, "input": err["input"]}
                if "ctx" in err:
                    detail["ctx"] = err["ctx"]
                errors.append(detail)
            raise ValidationError.from_exception_data(exc.title, errors) from None

    return WrapValidator(strip)


def require_tag(tags: tuple[str, ...]) -> Callable[[Any], Any]:
    """A before-validator: a mapping without `type` gets a message listing the choices."""

    def check(value: Any) -> Any:
        if isinstance(value, dict) and "type" not in value:
            raise ValueError(f"needs a 'type': one of {', '.join(tags)}")
        return value

    return check
