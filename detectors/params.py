"""The base of every rule's thresholds: frozen, validated, unknown keys rejected."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict


class Thresholds(BaseModel):
    """Base for a rule's thresholds, loaded from config.

    Frozen (safe to share between requests and threads), validated on creation, and strict
    about keys: a misspelt threshold is an error, never a silently ignored default.

    >>> class Example(Thresholds):
    ...     limit: float = 1.0
    >>> Example.model_validate({"limit": 2}).limit
    2.0
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


_DUMPS: dict[int, tuple[Thresholds, dict[str, Any]]] = {}
_MAX_DUMPS = 256


def dumped(params: Thresholds) -> Mapping[str, Any]:
    """`params.model_dump()`, computed once per (frozen) instance: a rule's evidence repeats
    its thresholds on every alert, and the endpoint's on every request. Do not mutate it.

    >>> class Example(Thresholds):
    ...     limit: float = 1.0
    >>> p = Example()
    >>> dumped(p) == p.model_dump() and dumped(p) is dumped(p)
    True
    """
    entry = _DUMPS.get(id(params))
    if entry is None or entry[0] is not params:  # (held here: its id is not reused meanwhile)
        if len(_DUMPS) >= _MAX_DUMPS:
            _DUMPS.clear()
        entry = _DUMPS[id(params)] = (params, params.model_dump())
    return entry[1]
