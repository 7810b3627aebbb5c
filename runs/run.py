"""One scenario run as its manager records it (`runs.manager`): its status, its components'
processes (`Part`) and what their commands need (`RunSpec`)."""

from __future__ import annotations

import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from runs.components import Component, ComponentState, Plan
from runs.logs import tail

RunStatus = Literal["running", "stopping", "finished", "failed", "stopped"]
ACTIVE: tuple[RunStatus, ...] = ("running", "stopping")
#: What `Run.to_dict(private=False)` shows of the fields only the control token may read.
PRIVATE_FIELDS: dict[str, Any] = {"error": None, "workdir": None, "overrides": None}


@dataclass(frozen=True)
class RunSpec:
    """What the commands of one run's components need."""

    run_id: str
    scenario_file: Path
    stack_file: Path | None
    speed: float | str | None
    duration_s: float | None
    seed: int | None
    control_file: Path | None = None  # live pacing changes, polled by the run
    job: str | None = None
    pipeline_file: Path | None = None  # the run's copy of the job's pipeline config
    endpoint_settings: Path | None = None  # the endpoint's `--settings` file


@dataclass
class Part:
    """One component process of a run."""

    name: Component
    log: Path
    command: list[str] = field(default_factory=list)
    state: ComponentState = "starting"
    pid: int | None = None
    exit_code: int | None = None
    started_at: int | None = None  # epoch ms, when spawned
    ended_at: int | None = None
    url: str | None = None  # the endpoint's
    progress: list[dict[str, Any]] | None = None  # the job's, latest report per query
    signalled: bool = False  # we sent it its stop signal: its end is `stopped`
    draining: bool = False  # the job, asked to drain: exiting 0 is its `stopped`
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def ended(self) -> bool:
        return self.state in ("exited", "stopped")

    def to_dict(self, *, private: bool = True) -> dict[str, Any]:
        """Without `private`: no log tail, log file or endpoint URL."""
        body: dict[str, Any] = {
            "name": self.name,
            "state": self.state,
            "pid": self.pid,
            "exit_code": self.exit_code,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "progress": self.progress,
            "url": self.url if private else None,
            "log": str(self.log) if private else None,
            "log_tail": tail(self.log, 2000) if private else None,
        }
        return body


@dataclass
class Run:
    run_id: str
    scenario: str
    speed: float | str | None
    duration_s: float | None
    seed: int | None
    overrides: dict[str, Any]
    workdir: Path
    command: list[str]
    started_at: int  # epoch ms
    pid: int | None = None  # the simulator's
    status: RunStatus = "running"
    ended_at: int | None = None
    exit_code: int | None = None  # the simulator's
    summary: dict[str, Any] | None = None
    error: str | None = None
    live: dict[str, Any] | None = None  # pacing set while running: speed, max_rate
    plan: Plan = field(default_factory=lambda: Plan(("simulator",)))
    parts: dict[Component, Part] = field(default_factory=dict)
    spec: RunSpec | None = field(default=None, repr=False)
    stop_requested: bool = False
    ending: bool = False  # the stop sequence has begun (by stop() or by the supervisor)
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    def to_dict(self, *, private: bool = True) -> dict[str, Any]:
        """The run as the API shows it; without `private` (no control token), no stderr tail,
        working directory, overrides, component logs or endpoint URL."""
        body = {
            "run_id": self.run_id,
            "scenario": self.scenario,
            "status": self.status,
            "pid": self.pid,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "exit_code": self.exit_code,
            "speed": self.speed,
            "duration_s": self.duration_s,
            "seed": self.seed,
            "live": self.live,
            "job": self.plan.job,
            "components": [self.parts[c].to_dict(private=private) for c in self.plan.components],
            "overrides": self.overrides,
            "summary": self.summary,
            "error": self.error,
            "workdir": str(self.workdir),
        }
        if not private:
            body.update(PRIVATE_FIELDS)
        return body
