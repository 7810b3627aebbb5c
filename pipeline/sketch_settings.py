"""Settings of a job's sketches query (`pipeline.sketches`), free of Spark imports: the job
configs load them."""

from __future__ import annotations

from pydantic import Field

from core.contracts import topics
from detectors.sketches import SketchParams
from pipeline.settings import TriggerSettings


class SketchSettings(SketchParams):
    """A job's sketches query (`<job>.sketches`): its parameters (defaults from
    `detectors.sketches`), whether it runs, where it publishes."""

    enabled: bool = Field(
        False,
        description="Run the sketches query: Count-Min heavy hitters and HyperLogLog distinct "
        "counts per window (`pipeline.sketches`). It reads and parses the input topic itself "
        "(docs/sketches.md has its cost).",
    )
    heavy_hitters_topic: str = Field(
        topics.HEAVY_HITTERS.name, description="Kafka topic of the heavy hitters."
    )
    distinct_counts_topic: str = Field(
        topics.DISTINCT_COUNTS.name, description="Kafka topic of the distinct counts."
    )
    trigger: TriggerSettings = Field(
        TriggerSettings(mode="microbatch", interval="10 seconds"),
        description="Trigger of the sketches query (each batch runs a few small Spark jobs).",
    )
