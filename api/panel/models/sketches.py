"""Response schema of `GET /v1/sketches`: the records of `core.contracts.sketches`, as the
pipeline wrote them to `aggregates.heavy-hitters` and `aggregates.distinct-counts`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Sketches(BaseModel):
    """Per job and kind, the newest window's sketch records: estimates with their bounds."""

    heavy_hitters: list[dict[str, Any]] = Field(
        description="Count-Min heavy hitters by rank (`core.contracts.sketches.HEAVY_HITTER`)."
    )
    distinct_counts: list[dict[str, Any]] = Field(
        description="HyperLogLog distinct counts, largest first "
        "(`core.contracts.sketches.DISTINCT_COUNT`)."
    )
