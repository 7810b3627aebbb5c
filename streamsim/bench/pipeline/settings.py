"""The bench's Spark stack (two cores) and the vehicle job's config for a bench run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.config import StackConfig

SCENARIO = Path("config/scenarios/vehicles.yaml")
PIPELINE = Path("config/pipelines/vehicles.yaml")
CORES = 2

#: A busy machine starts Python workers slowly (a transformWithState operator starts one at
#: planning, which must connect back in time).
SLOW_MACHINE = {"spark.python.authenticate.socketTimeout": "120s"}

Progress = Callable[[str], None]


def bench_stack(stack: StackConfig, work: Path) -> StackConfig:
    """Two cores, a shuffle partition per core, checkpoints and lake in `work`."""
    conf = {**stack.spark.conf, **SLOW_MACHINE}
    spark = stack.spark.model_copy(
        update={"master": f"local[{CORES}]", "shuffle_partitions": CORES, "conf": conf}
    )
    dirs = stack.dirs.model_copy(
        update={"checkpoints": work / "checkpoints", "lake": work / "lake"}
    )
    return stack.model_copy(update={"spark": spark, "dirs": dirs})


def own_checkpoints(stack: StackConfig, name: str) -> StackConfig:
    """`stack` with checkpoints in a folder of their own (a job's queries name theirs by job)."""
    dirs = stack.dirs.model_copy(update={"checkpoints": stack.dirs.checkpoints / name})
    return stack.model_copy(update={"dirs": dirs})


def job_config(base: Any, prefix: str, inputs: list[str], **update: Any) -> Any:
    """`base` (a PipelineConfig) reading `inputs`, writing topics named `<prefix>.<output>`."""
    vehicle = base.vehicles.model_copy(
        update={
            "stats_topic": f"{prefix}.vehicle-stats",
            "trips_topic": f"{prefix}.vehicle-trips",
            **update.pop("vehicle", {}),
        }
    )
    return base.model_copy(
        update={
            "input_topics": inputs,
            "output_topic": f"{prefix}.alerts",
            "deadletter_topic": f"{prefix}.deadletter",
            "vehicles": vehicle,
            **update,
        }
    )


def draining(base: Any, prefix: str, topic: str, batch: int) -> Any:
    """The job reading `topic` to its end in batches of `batch` events, then stopping."""
    once = base.trigger.model_copy(update={"mode": "available_now"})
    return job_config(
        base,
        prefix,
        [topic],
        trigger=once,
        max_offsets_per_trigger=batch,
        vehicle={"deadletter_trigger": once},
    )
