"""Scenario runs started and stopped from the API: one `streamsim simulate` child process each.

`RunManager.start(scenario, ...)`:
- reads `<scenario_dir>/<scenario>.yaml`, checks the `overrides` against the scenario's
  allow-list (`api.panel.models.overrides`), deep-merges them over the file and validates the
  result as a `ScenarioConfig` (a key off the list or a bad value raises `InvalidOverrides`,
  naming the key);
- writes the merged scenario and the API's resolved stack to `<runs_dir>/<run_id>/`, the stack
  without its Kafka client secrets (`sasl.password`, ...): the child gets those in
  `$STREAMSIM_KAFKA_CLIENT`;
- starts `streamsim simulate SCENARIO --sink kafka --json [--speed X] [--duration S]` there
  (`streamsim simulate` in a child process, which takes SIGTERM as a clean stop that flushes Kafka);
- `retune(run_id, {"speed": ..., "max_rate": ...})` changes a running run's pacing live: it
  rewrites `<workdir>/pacing.json` (whole, by rename), which the child polls
  (`streamsim simulate --control`, `simulators.pacing.PacingControl`);
- a watcher thread records the exit: `finished` with the `--json` summary, `failed` with the
  tail of stderr, or `stopped` when `stop(run_id)` asked for it (SIGTERM, then SIGKILL after
  `stop_timeout_s`).

At most one run per scenario is running at a time (`RunConflict` otherwise).

Overrides are a mapping merged key by key over the file (`{"delivery": {"drops":
{"probability": 0.01}}}`): nested mappings merge, a distribution whose `type` changes is
replaced whole, lists are replaced whole. `classes` may also be a mapping of class name to the
keys to merge over that class (`{"classes": {"env_sensor": {"clock": {...}}}}`), since a class's
own clock and delivery keys win over the top-level ones.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml
from pydantic import ValidationError

from api.panel.models.overrides import TunableKeys
from core.config import ConfigError, StackConfig
from core.config.errors import key_path
from core.config.loader import read_yaml
from core.config.stack import KAFKA_CLIENT_ENV, split_client_secrets
from core.pan import scrub_text
from scenarios.catalog import ScenarioConfig, deep_merge

RunStatus = Literal["running", "stopping", "finished", "failed", "stopped"]
ACTIVE: tuple[RunStatus, ...] = ("running", "stopping")

#: The environment a run does not get. The PAN secret it keeps: the card scenario tokenizes
#: cards with the endpoint's key, so both streams join on tokens.
SECRET_ENV = ("STREAMSIM_API_TOKEN",)
STDERR_TAIL_CHARS = 4000
#: The run's pacing control file in its working directory (`streamsim simulate --control`).
CONTROL_FILE = "pacing.json"
#: What `Run.to_dict(private=False)` shows of the fields only the control token may read.
PRIVATE_FIELDS: dict[str, Any] = {"error": None, "workdir": None, "overrides": None}
REPO_ROOT = Path(__file__).resolve().parents[2]


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


class InvalidOverrides(ValueError):
    """`problems`: FastAPI-style error items, `loc` relative to the overrides mapping."""

    def __init__(self, problems: list[dict[str, Any]]) -> None:
        self.problems = problems
        super().__init__("; ".join(p["msg"] for p in problems))


@dataclass(frozen=True)
class RunSpec:
    """What a command needs to start one run."""

    run_id: str
    scenario_file: Path
    stack_file: Path | None
    speed: float | str | None
    duration_s: float | None
    seed: int | None
    control_file: Path | None = None  # live pacing changes, polled by the run


def simulate_command(spec: RunSpec) -> list[str]:
    """`streamsim simulate` for a run, with SIGTERM as a clean stop."""
    cmd = [sys.executable, "-m", "streamsim", "simulate", str(spec.scenario_file)]
    cmd += ["--sink", "kafka", "--json"]
    if spec.control_file is not None:
        cmd += ["--control", str(spec.control_file)]
    if spec.stack_file is not None:
        cmd += ["--config", str(spec.stack_file)]
    if spec.speed is not None:
        cmd += ["--speed", str(spec.speed)]
    if spec.duration_s is not None:
        cmd += ["--duration", repr(float(spec.duration_s))]
    if spec.seed is not None:
        cmd += ["--seed", str(spec.seed)]
    return cmd


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
    pid: int | None = None
    status: RunStatus = "running"
    ended_at: int | None = None
    exit_code: int | None = None
    summary: dict[str, Any] | None = None
    error: str | None = None
    live: dict[str, Any] | None = None  # pacing set while running: speed, max_rate
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    stop_requested: bool = False
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    def to_dict(self, *, private: bool = True) -> dict[str, Any]:
        """The run as the API shows it; without `private` (no control token), no stderr tail,
        working directory or overrides."""
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
            "overrides": self.overrides,
            "summary": self.summary,
            "error": self.error,
            "workdir": str(self.workdir),
        }
        if not private:
            body.update(PRIVATE_FIELDS)
        return body


def apply_overrides(data: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`data` with `overrides` merged over it (see the module doc for `classes` by name)."""
    over = dict(overrides)
    classes = over.pop("classes", None)
    merged = deep_merge(dict(data), over)
    if isinstance(classes, Mapping):
        current = [dict(c) for c in merged.get("classes") or [{"name": "default"}]]
        names = [c.get("name", "default") for c in current]
        unknown = sorted(set(classes) - set(names))
        if unknown:
            raise InvalidOverrides(
                [
                    {
                        "loc": ["classes", name],
                        "msg": f"key 'classes.{name}' names no class of this scenario; "
                        f"the classes are {names}",
                        "type": "unknown_class",
                        "input": classes[name],
                    }
                    for name in unknown
                ]
            )
        for c in current:
            extra = classes.get(c.get("name", "default"))
            if isinstance(extra, Mapping):
                c.update(deep_merge(c, dict(extra)))
        merged["classes"] = current
    elif classes is not None:
        merged["classes"] = classes
    return merged


def validate_scenario(data: dict[str, Any], overrides: Mapping[str, Any]) -> ScenarioConfig:
    """The merged scenario as a ScenarioConfig; errors name the key (classes by name when the
    overrides gave them by name)."""
    try:
        return ScenarioConfig.model_validate(data)
    except ValidationError as exc:
        described = ConfigError.from_validation("overrides", exc).problems
        by_name = isinstance(overrides.get("classes"), Mapping)
        names = [c.get("name", "default") for c in data.get("classes") or []]
        problems = []
        for error, text in zip(exc.errors(include_url=False), described, strict=True):
            loc = [p for p in error["loc"] if not (isinstance(p, str) and "function-" in p)]
            index = loc[1] if len(loc) > 1 and loc[0] == "classes" else None
            if by_name and isinstance(index, int) and index < len(names):
                loc[1] = names[index]
                text = text.replace(key_path(tuple(error["loc"][:2])), f"classes.{loc[1]}")
            problems.append(
                {
                    "loc": loc,
                    "msg": text,
                    "type": error["type"],
                    "input": _plain(error.get("input")),
                }
            )
        raise InvalidOverrides(problems) from None


def _plain(value: Any) -> Any:
    try:
        return orjson.loads(orjson.dumps(value, default=str))
    except TypeError:
        return str(value)


def default_scenario_dir() -> Path:
    """`config/scenarios` of the working directory, else of the repository."""
    here = Path("config/scenarios")
    return here if here.is_dir() else REPO_ROOT / "config" / "scenarios"


class RunManager:
    def __init__(
        self,
        runs_dir: Path,
        *,
        stack: StackConfig | None = None,
        scenario_dir: Path | None = None,
        command: Callable[[RunSpec], list[str]] = simulate_command,
        stop_timeout_s: float = 15.0,
        keep: int = 100,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.runs_dir = Path(runs_dir)
        self.stack = stack
        self.scenario_dir = Path(scenario_dir) if scenario_dir else default_scenario_dir()
        self.command = command
        self.stop_timeout_s = stop_timeout_s
        self.keep = keep
        base_env = dict(os.environ if env is None else env)
        self.env = {k: v for k, v in base_env.items() if k not in SECRET_ENV}
        self.cwd = cwd
        self._runs: dict[str, Run] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_stack(cls, stack: StackConfig, **kwargs: Any) -> RunManager:
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

    def start(
        self,
        scenario: str,
        *,
        speed: float | str | None = None,
        duration_s: float | None = None,
        seed: int | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> Run:
        overrides = dict(overrides or {})
        data = self._scenario_data(scenario)
        problems = TunableKeys.of(data).check(overrides)
        if problems:
            raise InvalidOverrides(problems)
        data = apply_overrides(data, overrides)
        validate_scenario(data, overrides)
        with self._lock:
            for run in self._runs.values():
                if run.scenario == scenario and run.status in ACTIVE:
                    raise RunConflict(run)
            run_id = f"{scenario}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
            data.setdefault("run_id", run_id)  # its own ids: see ScenarioConfig.run_id
            workdir = self.runs_dir / run_id
            workdir.mkdir(parents=True, exist_ok=True)
            scenario_file = workdir / "scenario.yaml"
            scenario_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
            stack_file, env = None, self.env
            if self.stack is not None:
                # Kafka client secrets go to the child by environment, never into the file.
                data, client_secrets = split_client_secrets(self.stack)
                stack_file = workdir / "stack.yaml"
                stack_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
                if client_secrets:
                    env = {**env, KAFKA_CLIENT_ENV: orjson.dumps(client_secrets).decode()}
            control = workdir / CONTROL_FILE
            spec = RunSpec(run_id, scenario_file, stack_file, speed, duration_s, seed, control)
            command = self.command(spec)
            run = Run(
                run_id=run_id,
                scenario=scenario,
                speed=speed,
                duration_s=duration_s,
                seed=seed,
                overrides=overrides,
                workdir=workdir,
                command=command,
                started_at=time.time_ns() // 1_000_000,
            )
            with (
                (workdir / "stdout.log").open("wb") as out,
                (workdir / "stderr.log").open("wb") as err,
            ):
                run.proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    env=env,
                    cwd=self.cwd,
                    start_new_session=True,  # Ctrl-C on the API's terminal is the API's to handle
                )
            run.pid = run.proc.pid
            self._runs[run_id] = run
            self._forget_old()
        threading.Thread(target=self._watch, args=(run,), name=f"run-{run_id}", daemon=True).start()
        return run

    def _forget_old(self) -> None:
        ended = [r for r in self._runs.values() if r.status not in ACTIVE]
        for run in sorted(ended, key=lambda r: r.started_at)[: max(0, len(self._runs) - self.keep)]:
            del self._runs[run.run_id]

    def _watch(self, run: Run) -> None:
        assert run.proc is not None
        code = run.proc.wait()
        summary = _last_json_line(run.workdir / "stdout.log")
        with self._lock:
            run.exit_code = code
            run.ended_at = time.time_ns() // 1_000_000
            run.summary = summary
            if run.stop_requested:
                run.status = "stopped"
            elif code == 0:
                run.status = "finished"
            else:
                run.status = "failed"
                run.error = _tail(run.workdir / "stderr.log") or f"exited with code {code}"
        run.done.set()

    def stop(self, run_id: str, timeout_s: float | None = None) -> Run:
        """SIGTERM the run (its process group), wait, SIGKILL if it does not end in time."""
        run = self.get(run_id)
        with self._lock:
            if run.status not in ACTIVE:
                return run
            run.stop_requested = True
            run.status = "stopping"
        _signal(run, signal.SIGTERM)
        wait = self.stop_timeout_s if timeout_s is None else timeout_s
        if not run.done.wait(wait):
            _signal(run, signal.SIGKILL)
            run.done.wait(5.0)
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


def _signal(run: Run, sig: signal.Signals) -> None:
    if run.pid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(run.pid, sig)


def _last_json_line(path: Path) -> dict[str, Any] | None:
    try:
        lines = path.read_bytes().strip().splitlines()
    except OSError:
        return None
    if not lines:
        return None
    try:
        value = orjson.loads(lines[-1])
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _tail(path: Path, chars: int = STDERR_TAIL_CHARS) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-chars:].decode("utf-8", "replace").strip()
