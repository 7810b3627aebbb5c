"""Scenario runs started and stopped from the API: each run is the whole scenario, its
components child processes (`runs.components`: the simulator, the scenario's Spark job,
and the fraud endpoint in POS mode).

`RunManager.start(scenario, ...)`:
- reads `<scenario_dir>/<scenario>.yaml`, checks the `overrides` against the scenario's
  allow-list (`runs.tunable`), deep-merges them over the file and validates the
  result as a `ScenarioConfig` (a key off the list or a bad value raises `InvalidOverrides`,
  naming the key);
- plans the components (`components`: all the scenario needs by default, or a subset holding
  the simulator; a manager without a stack starts the simulator only);
- writes the merged scenario and the API's resolved stack to `<runs_dir>/<run_id>/`, the stack
  without its Kafka client secrets (`sasl.password`, ...): the children get those in
  `$STREAMSIM_KAFKA_CLIENT`. The stack's checkpoints are the run's own (`checkpoints/`), its
  API port the run's endpoint's;
- the job gets its own copy of the pipeline config (`pipeline.yaml`): the run's input topic,
  read from where it ends at the start (fresh checkpoints: earlier runs are not re-read);
- starts each component in its own process group (stopping kills the group: no orphans):
  the endpoint, `streamsim api` on a free port, then the job, `streamsim pipeline run JOB`,
  then the simulator, `streamsim simulate SCENARIO --sink kafka --json --control pacing.json`
  (after the endpoint answers its health check, in POS mode);
- `retune(run_id, {"speed": ..., "max_rate": ...})` changes a running run's pacing live: it
  rewrites `<workdir>/pacing.json` (whole, by rename), which the simulator polls
  (`streamsim simulate --control`, `simulators.pacing.PacingControl`);
- a supervisor thread per run records each component's state (starting, running, exited with
  its code, stopped), the job's batch progress (from `progress`, the panel's view of the
  `metrics` topic), and ends the run: when the simulator exits by itself, the job is asked to
  drain (`pipeline.signals.DRAIN_SIGNAL`: it processes what its topics hold, then exits) and
  given `drain_timeout_s` to (a job still starting, no batch yet, first gets
  `job_start_timeout_s` to start), then the endpoint: `finished` with the `--json` summary;
  `failed` with the tail of stderr when the simulator fails or another component exits first;
  `stopped` when `stop(run_id)` asked for it (the same order: each
  group gets its stop signal, SIGTERM or the job's SIGINT, then SIGKILL after
  `stop_timeout_s`).

At most one run per scenario is running at a time (`RunConflict` otherwise).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import orjson
import yaml
from pydantic import ValidationError

from core.config import ConfigError, StackConfig
from core.config.loader import read_yaml
from core.config.stack import KAFKA_CLIENT_ENV, split_client_secrets
from core.contracts import topics
from core.pan import scrub_text
from core.ports import free_port
from pipeline.signals import DRAIN_SIGNAL
from runs import commands
from runs.components import (
    COMPONENTS,
    STOP_SIGNALS,
    Component,
    Plan,
    job_pipeline,
    job_progress,
    load_pipelines,
    plan_components,
    pos_mode,
)
from runs.health import endpoint_healthy
from runs.logs import last_json_line, tail
from runs.overrides import InvalidOverrides, apply_overrides, validate_scenario
from runs.process import kill_group, now_ms, spawn, stop_group
from runs.run import ACTIVE, Part, Run, RunSpec
from runs.tunable import TunableKeys
from scenarios.catalog import ScenarioConfig

#: The environment a run does not get. The PAN secret it keeps: the card scenario tokenizes
#: cards with the endpoint's key, so both streams join on tokens.
SECRET_ENV = ("STREAMSIM_API_TOKEN",)
#: The run's pacing control file in its working directory (`streamsim simulate --control`).
CONTROL_FILE = "pacing.json"
#: Each component's log in the run's working directory (the simulator's stdout holds its
#: `--json` summary, so its stderr is kept apart).
LOGS: dict[Component, str] = {
    "simulator": "stderr.log",
    "job": "job.log",
    "endpoint": "endpoint.log",
}
#: Progress fields that count since the API started, not since the run's job did.
API_TOTALS = ("batches_seen", "input_rows_seen", "dropped_by_watermark_seen", "late_events_seen")
REPO_ROOT = Path(__file__).resolve().parents[1]


class UnknownScenario(LookupError):
    pass


class UnknownRun(LookupError):
    pass


class RunConflict(RuntimeError):
    def __init__(self, run: Run) -> None:
        self.run = run
        super().__init__(f"scenario {run.scenario} is already running as {run.run_id}")


class RunNotActive(RuntimeError):
    def __init__(self, run: Run) -> None:
        self.run = run
        super().__init__(f"run {run.run_id} is {run.status}: only a running run can be retuned")


class RunUnavailable(RuntimeError):
    """A component cannot be prepared (Kafka unreachable for the job's offsets, no free port)."""


class ProgressSource(Protocol):
    """The latest batch report per streaming query (`live.views.feeds.PipelineProgress`)."""

    def queries(self, now_ms: int) -> list[dict[str, Any]]: ...


def simulate_command(spec: RunSpec) -> list[str]:
    """`streamsim simulate` for a run, with SIGTERM as a clean stop."""
    return commands.simulate(
        spec.scenario_file,
        stack_file=spec.stack_file,
        control_file=spec.control_file,
        speed=spec.speed,
        duration_s=spec.duration_s,
        seed=spec.seed,
    )


def pipeline_run_command(spec: RunSpec) -> list[str]:
    assert spec.job and spec.pipeline_file and spec.stack_file
    return commands.pipeline_run(spec.job, spec.pipeline_file, spec.stack_file)


def api_command(spec: RunSpec) -> list[str]:
    assert spec.stack_file and spec.endpoint_settings
    return commands.api(spec.stack_file, spec.endpoint_settings)


CommandOf = Callable[[RunSpec], list[str]]
DEFAULT_COMMANDS: dict[Component, CommandOf] = {
    "simulator": simulate_command,
    "job": pipeline_run_command,
    "endpoint": api_command,
}


def default_scenario_dir() -> Path:
    """`config/scenarios` of the working directory, else of the repository."""
    here = Path("config/scenarios")
    return here if here.is_dir() else REPO_ROOT / "config" / "scenarios"


def default_pipeline_dir() -> Path:
    """`config/pipelines` of the working directory, else of the repository."""
    here = Path("config/pipelines")
    return here if here.is_dir() else REPO_ROOT / "config" / "pipelines"


def topic_ends(stack: StackConfig, names: Sequence[str]) -> dict[str, dict[int, int]]:
    """Topic -> partition -> end offset, each topic created first if it is not there. Fails
    within seconds when the cluster does not answer (the start request gets its 503 at once)."""
    from core.kafka import ensure_topics
    from core.kafka.admin import is_reachable
    from core.kafka.offsets import end_offsets

    if not is_reachable(stack, timeout_s=5.0):
        raise ConnectionError(f"Kafka at {stack.kafka.bootstrap_servers} does not answer")
    ensure_topics(stack, list(names))
    return {name: end_offsets(stack, name, timeout_s=15.0) for name in names}


#: A run endpoint's settings file body and the topic it publishes decisions to.
EndpointSettings = Callable[[], tuple[dict[str, Any], str]]


def default_endpoint_settings() -> tuple[dict[str, Any], str]:
    """The endpoint's defaults with no state rebuilt from earlier runs (each run has ids of its
    own), publishing to `cards.activity`."""
    return {"rebuild_lookback_s": 0.0}, topics.CARDS_ACTIVITY.name


class RunManager:
    def __init__(
        self,
        runs_dir: Path,
        *,
        stack: StackConfig | None = None,
        scenario_dir: Path | None = None,
        pipeline_dir: Path | None = None,
        command: CommandOf = simulate_command,
        commands: Mapping[Component, CommandOf] | None = None,
        stop_timeout_s: float = 15.0,
        drain_timeout_s: float = 600.0,
        job_start_timeout_s: float = 120.0,
        endpoint_timeout_s: float = 90.0,
        keep: int = 100,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        offsets: Callable[[StackConfig, Sequence[str]], Mapping[str, Mapping[int, int]]]
        | None = None,
        healthy: Callable[[str], bool] = endpoint_healthy,
        poll_s: float = 0.2,
        starts: Sequence[Component] = ("simulator",),
        endpoint_settings: EndpointSettings = default_endpoint_settings,
    ) -> None:
        """`command` (the simulator's) and `commands` (any component's) replace the real ones
        (tests); `offsets` replaces the Kafka lookup of the job's starting offsets and
        `healthy` the endpoint's health check. `starts`: the components this manager may
        start (`for_stack`: all); the job and the endpoint need a `stack`.
        `endpoint_settings`: the run endpoints' settings (the API passes its own)."""
        self.runs_dir = Path(runs_dir)
        self.stack = stack
        self.scenario_dir = Path(scenario_dir) if scenario_dir else default_scenario_dir()
        self.pipeline_dir = Path(pipeline_dir) if pipeline_dir else default_pipeline_dir()
        self.commands: dict[Component, CommandOf] = {
            **DEFAULT_COMMANDS,
            "simulator": command,
            **(commands or {}),
        }
        self.stop_timeout_s = stop_timeout_s
        self.drain_timeout_s = drain_timeout_s
        self.job_start_timeout_s = job_start_timeout_s
        self.endpoint_timeout_s = endpoint_timeout_s
        self.keep = keep
        base_env = dict(os.environ if env is None else env)
        self.env = {k: v for k, v in base_env.items() if k not in SECRET_ENV}
        self.cwd = cwd
        self.offsets = offsets or topic_ends
        self.healthy = healthy
        self.poll_s = poll_s
        self.starts = tuple(starts)
        self.endpoint_settings = endpoint_settings
        #: The jobs' batch reports (the panel's `metrics` feed), if the API reads them.
        self.progress: ProgressSource | None = None
        self._runs: dict[str, Run] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_stack(cls, stack: StackConfig, **kwargs: Any) -> RunManager:
        """Runs under `<dirs.data>/runs`, each starting all its scenario needs."""
        kwargs.setdefault("starts", COMPONENTS)
        return cls(Path(stack.dirs.data) / "runs", stack=stack, **kwargs)

    # -- scenarios -------------------------------------------------------------------------

    def scenario_files(self) -> dict[str, Path]:
        """Scenario name (the file's stem) -> file, for every `*.yaml` in the scenario dir."""
        if not self.scenario_dir.is_dir():
            return {}
        return {p.stem: p for p in sorted(self.scenario_dir.glob("*.yaml"))}

    def scenarios(self) -> list[dict[str, Any]]:
        """Each scenario file: its name, path, resolved config (defaults filled in) or error, and
        the keys a run's overrides may set (`tunable`, dotted)."""
        out = []
        for name, path in self.scenario_files().items():
            entry: dict[str, Any] = {
                "name": name,
                "file": str(path),
                "config": None,
                "error": None,
                "tunable": [],
            }
            try:
                data = read_yaml(path)
                if data.get("kind", "scenario") != "scenario":
                    continue
                entry["config"] = ScenarioConfig.model_validate(data).model_dump(mode="json")
                entry["tunable"] = TunableKeys.of(entry["config"]).dotted()
            except ConfigError as exc:
                entry["error"] = str(exc)
            except ValidationError as exc:
                entry["error"] = str(ConfigError.from_validation(path, exc))
            out.append(entry)
        return out

    def _scenario_data(self, scenario: str) -> dict[str, Any]:
        path = self.scenario_files().get(scenario)
        if path is None:
            known = ", ".join(self.scenario_files()) or "none"
            raise UnknownScenario(
                f"no scenario {scrub_text(repr(scenario))} in {self.scenario_dir}; known: {known}"
            )
        return read_yaml(path)

    # -- runs ------------------------------------------------------------------------------

    def available(self) -> tuple[Component, ...]:
        """What this manager can start: the job and the endpoint need the stack."""
        if self.stack is None:
            return ("simulator",)
        return tuple(c for c in COMPONENTS if c == "simulator" or c in self.starts)

    def plan(self, scenario: ScenarioConfig, components: Sequence[str] | None = None) -> Plan:
        """The components a run of `scenario` starts (see `plan_components`)."""
        return plan_components(
            scenario,
            load_pipelines(self.pipeline_dir),
            activity_topic=self._endpoint_settings()[1] if pos_mode(scenario) else "",
            requested=components,
            available=self.available(),
        )

    def start(
        self,
        scenario: str,
        *,
        speed: float | str | None = None,
        duration_s: float | None = None,
        seed: int | None = None,
        overrides: Mapping[str, Any] | None = None,
        components: Sequence[str] | None = None,
    ) -> Run:
        overrides = dict(overrides or {})
        data = self._scenario_data(scenario)
        problems = TunableKeys.of(data).check(overrides)
        if problems:
            raise InvalidOverrides(problems)
        data = apply_overrides(data, overrides)
        plan = self.plan(validate_scenario(data, overrides), components)
        self._check_conflict(scenario)
        url = None
        if "endpoint" in plan.components:
            # Set here, after the allow-list: the run posts to its own endpoint only.
            url = f"http://127.0.0.1:{free_port()}"
            domain = data.setdefault("domain", {})
            domain["endpoint"] = {**(domain.get("endpoint") or {}), "url": f"{url}/v1/transactions"}
        ends: Mapping[str, Mapping[int, int]] = {}
        if plan.pipeline is not None and self.stack is not None:
            try:
                ends = self.offsets(self.stack, plan.job_inputs)
            except Exception as exc:  # Kafka's errors are many; the message says which
                raise RunUnavailable(
                    f"cannot read where the job's input {list(plan.job_inputs)} ends: {exc}"
                ) from None
        with self._lock:
            self._check_conflict(scenario, locked=True)
            run_id = f"{scenario}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
            data.setdefault("run_id", run_id)  # its own ids: see ScenarioConfig.run_id
            workdir = self.runs_dir / run_id
            workdir.mkdir(parents=True, exist_ok=True)
            spec, env = self._write_files(run_id, workdir, data, plan, ends, url)
            spec = dataclasses.replace(spec, speed=speed, duration_s=duration_s, seed=seed)
            run = Run(
                run_id=run_id,
                scenario=scenario,
                speed=speed,
                duration_s=duration_s,
                seed=seed,
                overrides=overrides,
                workdir=workdir,
                command=self.commands["simulator"](spec),
                started_at=now_ms(),
                plan=plan,
                spec=spec,
            )
            run.parts = {c: Part(c, workdir / LOGS[c], url=url if c == "endpoint" else None)
                         for c in plan.components}  # fmt: skip
            for name in plan.components:  # start order: endpoint, job, simulator
                if name == "simulator" and "endpoint" in run.parts:
                    break  # once the endpoint answers (the supervisor)
                self._spawn(run, name, env)
            self._runs[run_id] = run
            self._forget_old()
        thread = threading.Thread(
            target=self._supervise, args=(run, env), name=f"run-{run_id}", daemon=True
        )
        thread.start()
        return run

    def _check_conflict(self, scenario: str, *, locked: bool = False) -> None:
        with contextlib.nullcontext() if locked else self._lock:
            for run in self._runs.values():
                if run.scenario == scenario and run.status in ACTIVE:
                    raise RunConflict(run)

    def _endpoint_settings(self) -> tuple[dict[str, Any], str]:
        """The run endpoints' settings and the topic they publish decisions to."""
        return self.endpoint_settings()

    def _write_files(
        self,
        run_id: str,
        workdir: Path,
        data: dict[str, Any],
        plan: Plan,
        ends: Mapping[str, Mapping[int, int]],
        url: str | None,
    ) -> tuple[RunSpec, dict[str, str]]:
        """The run's scenario, stack, pipeline and endpoint settings files; its environment."""
        scenario_file = workdir / "scenario.yaml"
        scenario_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        stack_file, env = None, self.child_env()
        if self.stack is not None:
            # Kafka client secrets go to the children by environment, never into the file.
            stack, _ = split_client_secrets(self.stack)
            if plan.pipeline is not None:
                stack["dirs"]["checkpoints"] = str(workdir / "checkpoints")
            if url is not None:
                stack["api"] = {
                    **stack["api"],
                    "host": "127.0.0.1",
                    "port": int(url.rsplit(":", 1)[1]),
                }
            stack_file = workdir / "stack.yaml"
            stack_file.write_text(yaml.safe_dump(stack, sort_keys=False), encoding="utf-8")
        pipeline_file = settings_file = None
        if plan.pipeline is not None:
            pipeline_file = workdir / "pipeline.yaml"
            pipeline = job_pipeline(plan, ends)
            pipeline_file.write_text(yaml.safe_dump(pipeline, sort_keys=False), encoding="utf-8")
        if url is not None:
            settings_file = workdir / "api.yaml"
            settings = self._endpoint_settings()[0]
            settings_file.write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")
        spec = RunSpec(
            run_id, scenario_file, stack_file, None, None, None, workdir / CONTROL_FILE,
            plan.job, pipeline_file, settings_file,
        )  # fmt: skip
        return spec, env

    def child_env(self) -> dict[str, str]:
        """The environment of a run's children (and of its evaluation): the API's without its
        control token, plus the Kafka client secrets the run's stack file leaves out."""
        env = dict(self.env)
        if self.stack is not None:
            client_secrets = split_client_secrets(self.stack)[1]
            if client_secrets:
                env[KAFKA_CLIENT_ENV] = orjson.dumps(client_secrets).decode()
        return env

    def _spawn(self, run: Run, name: Component, env: Mapping[str, str]) -> None:
        """Start one component in a process group of its own (stopping kills the group)."""
        assert run.spec is not None
        part = run.parts[name]
        part.command = run.command if name == "simulator" else self.commands[name](run.spec)
        out_path = run.workdir / ("stdout.log" if name == "simulator" else LOGS[name])
        with out_path.open("ab") as out, part.log.open("ab") as err:
            part.proc = spawn(part.command, stdout=out, stderr=err, env=env, cwd=self.cwd)
        part.pid = part.proc.pid
        part.started_at = now_ms()
        # The simulator runs once spawned; the endpoint once healthy, the job at its first
        # batch (when the API reads the metrics feed; else once spawned).
        ready = name == "simulator" or (name == "job" and self.progress is None)
        part.state = "running" if ready else "starting"
        if name == "simulator":
            run.pid = part.pid

    def _forget_old(self) -> None:
        ended = [r for r in self._runs.values() if r.status not in ACTIVE]
        for run in sorted(ended, key=lambda r: r.started_at)[: max(0, len(self._runs) - self.keep)]:
            del self._runs[run.run_id]

    # -- the supervisor ----------------------------------------------------------------------

    def _supervise(self, run: Run, env: Mapping[str, str]) -> None:
        """Record the components' states until every one has ended; end the run when one
        ends by itself (the simulator done, or another failing) or the endpoint never
        answers."""
        while True:
            self._reap(run)
            if not run.ending:
                self._advance(run, env)
                cause = self._ended_by_itself(run)
                if cause is not None and self._begin_ending(run):
                    with self._lock:
                        if cause != "simulator" or run.parts["simulator"].exit_code != 0:
                            run.error = run.error or self._failure(run, cause)
                    self._stop_parts(run)
            self._update_progress(run)
            if all(p.ended for p in run.parts.values()):
                self._finish(run)
                return
            time.sleep(self.poll_s)

    def _advance(self, run: Run, env: Mapping[str, str]) -> None:
        """The endpoint to running once healthy, then the simulator started; the job to running
        at its first batch report."""
        endpoint = run.parts.get("endpoint")
        if endpoint is not None and endpoint.state == "starting" and endpoint.url:
            if self.healthy(endpoint.url):
                with self._lock:
                    endpoint.state = "running"
                    if run.parts["simulator"].proc is None:
                        self._spawn(run, "simulator", env)
            elif endpoint.started_at and now_ms() - endpoint.started_at > (
                self.endpoint_timeout_s * 1000
            ):
                with self._lock:
                    run.error = (
                        f"the endpoint did not answer {endpoint.url}/v1/health within "
                        f"{self.endpoint_timeout_s:.0f}s:\n{tail(endpoint.log)}"
                    )
                if self._begin_ending(run):
                    self._stop_parts(run)

    def _ended_by_itself(self, run: Run) -> Component | None:
        """The first component that ended without being stopped: the run ends with it."""
        return next((p.name for p in run.parts.values() if p.state == "exited"), None)

    def _failure(self, run: Run, name: Component) -> str:
        part = run.parts[name]
        end = tail(part.log)
        if name == "simulator":
            return end or f"exited with code {part.exit_code}"
        return f"the {name} exited with code {part.exit_code} while the run went on:\n{end}"

    def _update_progress(self, run: Run) -> None:
        job = run.parts.get("job")
        if job is None or self.progress is None or job.started_at is None or not run.plan.job:
            return
        try:
            queries = self.progress.queries(now_ms())
        except Exception:  # a feed hiccup must not end the supervisor
            return
        rows = [
            {k: v for k, v in q.items() if k not in API_TOTALS}
            for q in job_progress(queries, run.plan.job, job.started_at)
        ]
        with self._lock:
            job.progress = rows
            if rows and job.state == "starting":
                job.state = "running"

    def _reap(self, run: Run) -> None:
        """Record the end of every component whose process has exited, and kill what it left
        in its group."""
        for part in run.parts.values():
            if part.proc is None or part.exit_code is not None:
                continue
            code = part.proc.poll()
            if code is None:
                continue
            kill_group(part.pid, signal.SIGKILL)  # e.g. a JVM its driver left behind
            with self._lock:
                part.exit_code = code
                part.ended_at = now_ms()
                drained = part.draining and code == 0
                part.state = "stopped" if part.signalled or drained else "exited"

    def _begin_ending(self, run: Run) -> bool:
        """True for the one caller that runs the stop sequence."""
        with self._lock:
            if run.ending:
                return False
            run.ending = True
            run.status = "stopping"
            return True

    def _stop_parts(self, run: Run, grace_s: float | None = None) -> None:
        """Each component in stop order: its stop signal to its group (`STOP_SIGNALS`), SIGKILL
        after the grace period; the job after its drain (`_wait_drained`)."""
        for name in run.plan.stop_order():
            part = run.parts[name]
            if part.proc is None:
                with self._lock:
                    part.state, part.ended_at = "stopped", now_ms()
                continue
            if name == "job":
                self._wait_drained(run, part)
            self._terminate(part, self.stop_timeout_s if grace_s is None else grace_s)
            self._reap(run)

    def _wait_drained(self, run: Run, job: Part) -> None:
        """Once the simulator has finished by itself, ask the job to drain (`DRAIN_SIGNAL`: it
        processes what its topics hold, then exits 0) and wait for it, at most
        `drain_timeout_s`. A stop asked for, or a failure, does not wait."""
        simulator = run.parts.get("simulator")
        if simulator is None or simulator.exit_code != 0 or run.stop_requested:
            return
        # Spark's first batch can take a minute on a busy machine: the job first gets
        # `job_start_timeout_s` to report one (its drain handler is set by then).
        started = time.monotonic() + self.job_start_timeout_s
        while (
            self.progress is not None
            and job.state == "starting"
            and time.monotonic() < started
            and _alive(job)
            and not run.stop_requested
        ):
            self._update_progress(run)
            time.sleep(self.poll_s)
        if not _alive(job) or run.stop_requested or job.pid is None:
            return
        with self._lock:
            job.draining = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(job.pid, DRAIN_SIGNAL)  # the leader only: its JVM is no party to this
        deadline = time.monotonic() + self.drain_timeout_s
        while time.monotonic() < deadline and _alive(job) and not run.stop_requested:
            self._update_progress(run)
            time.sleep(self.poll_s)
        self._update_progress(run)

    def _terminate(self, part: Part, grace_s: float) -> None:
        assert part.proc is not None
        with self._lock:
            if part.exit_code is not None or part.proc.poll() is not None:
                return  # it ended by itself (a job dying while it drains): `_reap` says how
            part.signalled = True
        stop_group(part.proc, STOP_SIGNALS[part.name], grace_s)

    def _finish(self, run: Run) -> None:
        simulator = run.parts.get("simulator")
        summary = last_json_line(run.workdir / "stdout.log")
        crashed = next(
            (p.name for p in run.parts.values()
             if p.name != "simulator" and p.state == "exited" and p.exit_code != 0),
            None,
        )  # fmt: skip
        with self._lock:
            run.exit_code = simulator.exit_code if simulator else None
            run.ended_at = now_ms()
            run.summary = summary
            if crashed is not None and run.error is None and not run.stop_requested:
                run.error = self._failure(run, crashed)  # its results are partial: not finished
            if run.stop_requested:
                run.status = "stopped"
            elif run.error is None and run.exit_code == 0:
                run.status = "finished"
            else:
                run.status = "failed"
                run.error = run.error or f"exited with code {run.exit_code}"
        run.done.set()

    def stop(self, run_id: str, timeout_s: float | None = None) -> Run:
        """Stop every component of the run in stop order (see `_stop_parts`); returns once the
        run has ended. `timeout_s`: each component's grace after its stop signal, if not the
        manager's."""
        run = self.get(run_id)
        with self._lock:
            if run.status not in ACTIVE:
                return run
            run.stop_requested = True
            run.status = "stopping"
        if self._begin_ending(run):
            self._stop_parts(run, timeout_s)
        budget = 3 * (self.stop_timeout_s + 10)  # a drain under way ends at the stop
        run.done.wait(budget)
        return run

    def retune(self, run_id: str, changes: Mapping[str, Any]) -> Run:
        """Change a running run's `speed` (a factor or "max") and/or `max_rate` (events/s, None:
        no cap) live: the control file holds every value set so far, so a change the child
        has not read yet is not lost to the next."""
        unknown = sorted(set(changes) - {"speed", "max_rate"})
        if unknown or not changes:
            raise ValueError(f"retune takes speed and/or max_rate, not {unknown or 'nothing'}")
        run = self.get(run_id)
        with self._lock:
            if run.status != "running":
                raise RunNotActive(run)
            live = {**(run.live or {}), **changes}
            path = run.workdir / CONTROL_FILE
            part = path.with_suffix(".part")
            part.write_bytes(orjson.dumps(live))
            os.replace(part, path)  # whole: the child never reads half a file
            run.live = live
        return run

    def get(self, run_id: str) -> Run:
        with self._lock:
            run = self._runs.get(run_id)
        if run is None:
            raise UnknownRun(f"no run {scrub_text(repr(run_id))}")  # a PAN for an id: not echoed
        return run

    def list(self) -> list[Run]:
        """Newest first."""
        with self._lock:
            return sorted(self._runs.values(), key=lambda r: (r.started_at, r.run_id), reverse=True)

    def close(self) -> None:
        """Stop every active run (on API shutdown)."""
        active = [r for r in self.list() if r.status in ACTIVE]
        threads = [threading.Thread(target=self.stop, args=(r.run_id,)) for r in active]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def _alive(part: Part) -> bool:
    return part.proc is not None and part.proc.poll() is None
