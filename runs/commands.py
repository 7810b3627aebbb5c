"""The `python -m streamsim ...` command lines of the children this project starts, each built
here once: the simulator, a Spark job, the fraud endpoint, an evaluation, a load test and a
config check. Children run with this interpreter, so they see the same packages."""

from __future__ import annotations

import sys
from pathlib import Path


def streamsim(*args: str) -> list[str]:
    """`python -m streamsim ARGS` with this interpreter."""
    return [sys.executable, "-m", "streamsim", *args]


def simulate(
    scenario_file: Path,
    *,
    stack_file: Path | None = None,
    control_file: Path | None = None,
    speed: float | str | None = None,
    duration_s: float | None = None,
    seed: int | None = None,
) -> list[str]:
    """`streamsim simulate` into Kafka, its `--json` summary on stdout."""
    cmd = streamsim("simulate", str(scenario_file), "--sink", "kafka", "--json")
    if control_file is not None:
        cmd += ["--control", str(control_file)]
    if stack_file is not None:
        cmd += ["--config", str(stack_file)]
    if speed is not None:
        cmd += ["--speed", str(speed)]
    if duration_s is not None:
        cmd += ["--duration", repr(float(duration_s))]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    return cmd


def pipeline_run(job: str, pipeline_file: Path, stack_file: Path) -> list[str]:
    """`streamsim pipeline run JOB` on a pipeline config and stack (its checkpoints)."""
    return streamsim(
        "pipeline", "run", job, "--pipeline", str(pipeline_file), "--config", str(stack_file),
        "--json",
    )  # fmt: skip


def api(stack_file: Path, settings_file: Path) -> list[str]:
    """`streamsim api` (the fraud endpoint) on the port of the stack file."""
    return streamsim(
        "api", "--config", str(stack_file), "--settings", str(settings_file), "--no-access-log"
    )


def evaluate(
    scenario: str,
    id_prefix: str,
    out: Path,
    *,
    stack_file: Path | None = None,
    pipeline_file: Path | None = None,
    settings_file: Path | None = None,
) -> list[str]:
    """`streamsim evaluate NAME --run ID_PREFIX --out FILE`, with the run's files if given."""
    cmd = streamsim("evaluate", scenario, "--run", id_prefix, "--out", str(out))
    for option, path in (
        ("--config", stack_file),
        ("--pipeline", pipeline_file),
        ("--settings", settings_file),
    ):
        if path is not None:
            cmd += [option, str(path)]
    return cmd


def loadtest(file: Path, stack_file: Path | None, folder: Path, progress: Path) -> list[str]:
    """`streamsim loadtest FILE --out FOLDER --progress FILE --json`."""
    cmd = streamsim("loadtest", str(file), "--out", str(folder))
    cmd += ["--progress", str(progress), "--json"]
    if stack_file is not None:
        cmd += ["--config", str(stack_file)]
    return cmd


def config_check(file: Path) -> list[str]:
    """`streamsim config check FILE --json`: the config model's verdict on a file."""
    return streamsim("config", "check", str(file), "--json")
