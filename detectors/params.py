"""The base of every rule's thresholds: frozen, validated, unknown keys rejected."""

from __future__ import annotations

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
