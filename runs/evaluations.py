"""Evaluate now: `streamsim evaluate` scores one panel run against truth, on request.

`RunEvaluations.start(run_id)` (`POST /v1/control/runs/{run_id}/evaluation`):
- the run's scenario must have label types to score (`core.contracts.labels.LABELS`;
  `streamsim evaluate` knows a scenario by the name its truth topic carries), else
  `NotEvaluable`; a run that was stopped or failed cannot be scored (`RunNotScorable`): only a
  simulator that finished publishes the `simulator.run/1` record evaluation finds the run by;
- a running run is scored once it has finished (`waiting`), a finished one at once
  (`running`); one evaluation of a run at a time (`EvaluationBusy`);
- the evaluation is a child process in a process group of its own (as the run's components):
  `streamsim evaluate NAME --run ID_PREFIX --out <workdir>/evaluation-report.json` on the
  run's stack file, its copy of the job's pipeline config (the batch oracle's starting
  offsets) and its endpoint's settings (the topic of its decisions);
- once it ended, `<workdir>/evaluation.json` holds the record: the run, its knobs (speed,
  duration, seed, overrides, live pacing), the status (`done`, or `failed` with the log's
  tail) and the report. The records outlive the API process: `get` and `list` read them back
  (newest first), for the run-to-run comparison.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from core.config.loader import read_yaml
from core.contracts.labels import LABELS
from core.pan import scrub_text
from runs import commands
from runs.logs import tail
from runs.manager import RunManager, UnknownRun
from runs.process import kill_group, now_ms, spawn
from runs.run import Run

EvaluationStatus = Literal["waiting", "running", "done", "failed"]
PENDING: tuple[EvaluationStatus, ...] = ("waiting", "running")
#: In the run's working directory: the record (run, knobs, status, report), the report as
#: `streamsim evaluate --out` writes it, and the evaluation's log.
RECORD_FILE = "evaluation.json"
REPORT_FILE = "evaluation-report.json"
LOG_FILE = "evaluate.log"
#: The knobs a record keeps (the run's request fields and what was changed live).
KNOBS = ("speed", "duration_s", "seed", "overrides", "live")


class NotEvaluable(ValueError):
    """The run's scenario has nothing `streamsim evaluate` scores."""


class RunNotScorable(RuntimeError):
    """The run ended without the run record an evaluation needs (stopped, failed)."""


class EvaluationBusy(RuntimeError):
    """An evaluation of the run is already waiting or running."""


class UnknownEvaluation(LookupError):
    pass


@dataclass(frozen=True)
class EvaluationSpec:
    """What the `streamsim evaluate` command of one run needs."""

    scenario: str  # its `streamsim evaluate` name (the scenario config's `name`)
    id_prefix: str  # the run's event-id prefix (`simulate --json`)
    out: Path
    stack_file: Path | None = None
    pipeline_file: Path | None = None
    settings_file: Path | None = None


def evaluate_command(spec: EvaluationSpec) -> list[str]:
    return commands.evaluate(
        spec.scenario,
        spec.id_prefix,
        spec.out,
        stack_file=spec.stack_file,
        pipeline_file=spec.pipeline_file,
        settings_file=spec.settings_file,
    )


@dataclass
class Evaluation:
    """One evaluation of one run: its state, and the report once done."""

    run_id: str
    scenario: str  # the run's scenario (file name), as in the run list
    knobs: dict[str, Any]
    requested_at: int  # epoch ms
    status: EvaluationStatus = "waiting"
    started_at: int | None = None  # the child's start
    ended_at: int | None = None
    error: str | None = None
    report: dict[str, Any] | None = None
    pid: int | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def to_dict(self, *, private: bool = True) -> dict[str, Any]:
        """The record; without `private` (no control token) no overrides and no error text,
        as a run's."""
        knobs = dict(self.knobs)
        if not private:
            knobs["overrides"] = None
        return {
            "run_id": self.run_id,
            "scenario": self.scenario,
            "status": self.status,
            "requested_at": self.requested_at,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "knobs": knobs,
            "report": self.report,
            "error": self.error if private else None,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Evaluation:
        return cls(
            run_id=str(record["run_id"]),
            scenario=str(record["scenario"]),
            knobs=dict(record.get("knobs") or {}),
            requested_at=int(record["requested_at"]),
            status=record["status"],
            started_at=record.get("started_at"),
            ended_at=record.get("ended_at"),
            error=record.get("error"),
            report=record.get("report"),
        )


def knobs_of(run: Run) -> dict[str, Any]:
    """What the run was started (and retuned) with: the comparison's columns."""
    return {key: getattr(run, key) for key in KNOBS}


def evaluated_name(workdir: Path) -> str:
    """The `streamsim evaluate` name of the run's scenario (its config's `name`), from the
    merged scenario the run wrote; `NotEvaluable` when it has no label types."""
    try:
        name = read_yaml(workdir / "scenario.yaml").get("name")
    except Exception as exc:  # unreadable: the run's own file, nothing the client sent
        raise NotEvaluable(f"cannot read the run's scenario file: {exc}") from None
    if name not in LABELS:
        raise NotEvaluable(
            f"scenario {name!r} has nothing to score: `streamsim evaluate` scores "
            f"{', '.join(LABELS)} (the scenario's `name`, which its truth topic carries)"
        )
    return str(name)


class RunEvaluations:
    def __init__(
        self,
        runs: RunManager,
        *,
        command: Callable[[EvaluationSpec], list[str]] = evaluate_command,
        timeout_s: float = 900.0,
        keep: int = 100,
    ) -> None:
        """`command` replaces the real `streamsim evaluate` (tests); `timeout_s`: how long an
        evaluation may take before it is killed and failed; `keep`: how many records `list`
        returns."""
        self.runs = runs
        self.command = command
        self.timeout_s = timeout_s
        self.keep = keep
        self._evaluations: dict[str, Evaluation] = {}
        self._lock = threading.Lock()

    def start(self, run_id: str) -> Evaluation:
        """Score the run now (finished) or once it finishes (running); see the module doc."""
        run = self.runs.get(run_id)  # UnknownRun
        name = evaluated_name(run.workdir)
        with self._lock:
            if run.status in ("stopped", "failed"):
                raise RunNotScorable(
                    f"run {run.run_id} was {run.status}: only a run whose simulator finished "
                    "publishes the run record an evaluation scores; start a new run and let "
                    "it finish"
                )
            current = self._evaluations.get(run.run_id)
            if current is not None and current.status in PENDING:
                raise EvaluationBusy(f"run {run.run_id} is being evaluated ({current.status})")
            evaluation = Evaluation(run.run_id, run.scenario, knobs_of(run), now_ms())
            self._evaluations[run.run_id] = evaluation
        threading.Thread(
            target=self._evaluate,
            args=(evaluation, run, name),
            name=f"evaluate-{run.run_id}",
            daemon=True,
        ).start()
        return evaluation

    def get(self, run_id: str) -> Evaluation:
        """The run's latest evaluation: the one under way or done in this process, else its
        record on disk; `UnknownRun` / `UnknownEvaluation` (both 404s) otherwise."""
        with self._lock:
            found = self._evaluations.get(run_id)
        if found is not None:
            return found
        record = self._read(self.runs.runs_dir / run_id) if _plain_name(run_id) else None
        if record is not None:
            return record
        self.runs.get(run_id)  # UnknownRun when there is no such run at all
        raise UnknownEvaluation(
            f"run {scrub_text(repr(run_id))} has not been evaluated yet: POST "
            "/v1/control/runs/{run_id}/evaluation"
        )

    def list(self) -> list[Evaluation]:
        """Every evaluation, newest request first (at most `keep`): this process's, and the
        records of earlier ones in the runs directory."""
        found: dict[str, Evaluation] = {}
        folder = self.runs.runs_dir
        for path in folder.glob(f"*/{RECORD_FILE}") if folder.is_dir() else []:
            record = self._read(path.parent)
            if record is not None:
                found[record.run_id] = record
        with self._lock:
            found.update(self._evaluations)
        ordered = sorted(found.values(), key=lambda e: (e.requested_at, e.run_id), reverse=True)
        return ordered[: self.keep]

    def close(self) -> None:
        """Kill every evaluation still running (on API shutdown), its whole process group."""
        with self._lock:
            running = [e for e in self._evaluations.values() if e.proc is not None]
        for evaluation in running:
            if evaluation.proc is not None and evaluation.proc.poll() is None:
                kill_group(evaluation.pid, signal.SIGKILL)

    # -- the worker ------------------------------------------------------------------------

    def _evaluate(self, evaluation: Evaluation, run: Run, name: str) -> None:
        run.done.wait()
        if run.status != "finished":
            self._end(
                evaluation,
                run,
                error=f"run {run.run_id} ended {run.status}: only a finished run can be scored",
            )
            return
        prefix = (run.summary or {}).get("id_prefix")
        if not isinstance(prefix, str) or not prefix:
            self._end(evaluation, run, error="the run's simulator printed no id_prefix")
            return
        spec = run.spec
        out = run.workdir / REPORT_FILE
        with contextlib.suppress(FileNotFoundError):
            out.unlink()  # an earlier evaluation's report is not this one's
        command = self.command(
            EvaluationSpec(
                name,
                prefix,
                out,
                spec.stack_file if spec else None,
                spec.pipeline_file if spec else None,
                spec.endpoint_settings if spec else None,
            )
        )
        log = run.workdir / LOG_FILE
        with log.open("wb") as handle:
            proc = spawn(
                command,
                stdout=handle,
                stderr=subprocess.STDOUT,
                env=self.runs.child_env(),
                cwd=self.runs.cwd,
            )
        with self._lock:
            evaluation.proc, evaluation.pid = proc, proc.pid
            evaluation.status, evaluation.started_at = "running", now_ms()
        try:
            code = proc.wait(self.timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
            self._end(
                evaluation, run, error=f"did not finish within {self.timeout_s:.0f} s:\n"
                f"{tail(log)}",
            )  # fmt: skip
            return
        kill_group(proc.pid, signal.SIGKILL)  # e.g. a JVM its Spark session left behind
        if code != 0:
            self._end(evaluation, run, error=f"exited with code {code}:\n{tail(log)}")
            return
        try:
            report = orjson.loads(out.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            self._end(evaluation, run, error=f"no report in {out}: {exc}")
            return
        self._end(evaluation, run, report=report)

    def _end(
        self,
        evaluation: Evaluation,
        run: Run,
        *,
        report: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        """Done (with the report) or failed (with why); the record written whole."""
        with self._lock:
            evaluation.knobs = knobs_of(run)  # the live pacing the run ended with
            evaluation.report = report
            evaluation.error = error
            evaluation.status = "failed" if error is not None else "done"
            evaluation.ended_at = now_ms()
            evaluation.proc = None
            body = orjson.dumps(evaluation.to_dict(), option=orjson.OPT_INDENT_2)
        path = run.workdir / RECORD_FILE
        part = path.with_suffix(".part")
        part.write_bytes(body)
        os.replace(part, path)

    @staticmethod
    def _read(workdir: Path) -> Evaluation | None:
        try:
            return Evaluation.from_record(orjson.loads((workdir / RECORD_FILE).read_bytes()))
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None  # none, or not a record


def _plain_name(name: str) -> bool:
    """A run id names a directory right under the runs directory, nothing else."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name


__all__ = [
    "Evaluation",
    "EvaluationBusy",
    "EvaluationSpec",
    "NotEvaluable",
    "RunEvaluations",
    "RunNotScorable",
    "UnknownEvaluation",
    "UnknownRun",
    "evaluate_command",
    "evaluated_name",
]
