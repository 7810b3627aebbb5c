"""Load tests started from the panel: `streamsim loadtest` as a child process, one at a time.

`LoadTestManager.start(file, edits)`:
- reads `<loadtest_dir>/<file>.yaml` (`config/loadtests`), checks `edits` against the
  allow-list (`TUNABLE`: the rate shape, the warm-up and measured durations, the SLOs; of a
  `scenario` target, each path's rate shape and SLOs), merges them over the file and validates
  the result with the load-test config model (`streamsim config check`, a child: the API does
  not import the CLI). Anything else is `InvalidEdits`, naming the key. The target, payload and
  client stay the file's: the panel cannot point a load test at another host;
- writes the merged file and the API's stack (no Kafka client secrets: the child gets those in
  its environment) to `<dirs.data>/loadtests/<name>-<UTC stamp>-<hex>/` and runs
  `streamsim loadtest FILE --out THAT_FOLDER --progress progress.json --json` in its own
  process group. The folder is where the CLI's own runs put their reports, so the panel lists
  those too, and every earlier report stays listed across API restarts;
- `get(run_id)` / `list()`: the live figures (`progress.json`, rewritten about once a second
  by the child), the report and its Vega-Lite chart specs once written;
- `stop(run_id)`: SIGINT to the group (the CLI stops sending), SIGKILL after a grace.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import secrets
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml

from core.config import ConfigError, StackConfig
from core.config.loader import read_yaml
from core.config.stack import KAFKA_CLIENT_ENV, split_client_secrets
from core.pan import scrub_text
from runs import commands
from runs.logs import tail
from runs.manager import REPO_ROOT, SECRET_ENV
from runs.process import kill_group, now_ms, spawn, wait_group_gone
from runs.tunable import Tunable, TunableKeys
from scenarios.catalog import deep_merge

LoadTestStatus = Literal["running", "stopping", "finished", "failed", "stopped"]
ACTIVE: tuple[LoadTestStatus, ...] = ("running", "stopping")
#: The panel's bounds: a load test from the panel is a short look, not a soak.
MAX_DURATION_S = 3600.0
MAX_WARMUP_S = 600.0
#: What the panel may change of a load-test file. `load` and `slo` are set whole-or-merged
#: and validated by the load-test model (its keys and bounds); the rest stays the file's.
TUNABLE: tuple[Tunable, ...] = (
    Tunable(("load",)),
    Tunable(("slo",)),
    Tunable(("warmup_s",), le=MAX_WARMUP_S),
    Tunable(("duration_s",), le=MAX_DURATION_S),
    Tunable(("target", ("http", "kafka"), ("load", "slo"))),
)
EDITABLE_TOP = ("load", "warmup_s", "duration_s", "slo")
#: The files the manager keeps in a run's folder besides the CLI's report and charts.
PROGRESS_FILE, META_FILE, STDOUT, STDERR = "progress.json", "panel.json", "stdout.log", "stderr.log"
#: A run's figures shown in lists: the `loadtest --json` contract keys.
SUMMARY_KEYS = ("requests", "errors", "achieved_rate", "intended_rate", "latency_ms", "slo", "ok")
_KEY = re.compile(r"key '([^']+)'")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class UnknownLoadTest(LookupError):
    pass


class LoadTestConflict(RuntimeError):
    def __init__(self, run: LoadTestRun) -> None:
        self.run = run
        super().__init__(f"load test {run.run_id} is still running: one at a time")


class InvalidEdits(ValueError):
    """`problems`: FastAPI-style error items, `loc` relative to the edits mapping."""

    def __init__(self, problems: list[dict[str, Any]]) -> None:
        self.problems = problems
        super().__init__("; ".join(p["msg"] for p in problems))


def default_loadtest_dir() -> Path:
    """`config/loadtests` of the working directory, else of the repository."""
    here = Path("config/loadtests")
    return here if here.is_dir() else REPO_ROOT / "config" / "loadtests"


def editable(data: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a load-test file the panel may edit, as the file has it (a `scenario`
    target: each path's load and SLOs, since the file's own are not used)."""
    target = data.get("target")
    if isinstance(target, Mapping) and target.get("type") == "scenario":
        paths = {
            side: {k: target[side][k] for k in ("load", "slo") if k in target[side]}
            for side in ("http", "kafka")
            if isinstance(target.get(side), Mapping)
        }
        top = {k: data[k] for k in ("warmup_s", "duration_s") if k in data}
        return {**top, "target": paths}
    return {k: data[k] for k in EDITABLE_TOP if k in data}


def config_problems(message: str, path: Path) -> list[dict[str, Any]]:
    """`streamsim config check`'s error (`error: FILE: key 'a.b' ...; key 'c' ...`) as
    FastAPI-style items, one per key named."""
    text = message.strip().removeprefix("error:").strip()
    text = text.replace(f"{path}: ", "", 1).replace(str(path), path.name)
    starts = [m.start() for m in _KEY.finditer(text)]
    if not starts:
        return [{"loc": [], "msg": text or "invalid load test", "type": "invalid_loadtest"}]
    pieces = [text[a:b].rstrip("; ") for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
    out = []
    for piece in pieces:
        match = _KEY.match(piece)
        key = match.group(1) if match else ""
        loc: list[str | int] = [p for p in re.split(r"\.|\[|\]", key) if p]
        out.append({"loc": loc, "msg": piece, "type": "invalid_loadtest"})
    return out


def check_command(file: Path) -> list[str]:
    return commands.config_check(file)


def loadtest_command(file: Path, stack_file: Path | None, folder: Path) -> list[str]:
    return commands.loadtest(file, stack_file, folder, folder / PROGRESS_FILE)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def charts_of(folder: Path) -> list[dict[str, Any]]:
    """The report's Vega-Lite specs (`*.vl.json`, a `scenario` target's per path), by name."""
    out = []
    for spec_file in sorted(folder.glob("*.vl.json")) + sorted(folder.glob("*/*.vl.json")):
        spec = _read_json(spec_file)
        if spec is not None:
            name = str(spec_file.relative_to(folder)).removesuffix(".vl.json")
            out.append({"name": name, "spec": spec})
    return out


@dataclass
class LoadTestRun:
    run_id: str  # the folder's name
    folder: Path
    file: str | None = None  # the load-test file's name (None: a CLI run)
    name: str | None = None
    status: LoadTestStatus = "finished"
    started_at: int | None = None  # epoch ms
    ended_at: int | None = None
    exit_code: int | None = None
    edits: dict[str, Any] | None = None
    error: str | None = None
    pid: int | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    stop_requested: bool = False
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    def meta(self) -> dict[str, Any]:
        keys = ("file", "name", "status", "started_at", "ended_at", "exit_code", "edits", "error")
        return {k: getattr(self, k) for k in keys}

    @classmethod
    def from_folder(cls, folder: Path) -> LoadTestRun | None:
        """A finished run from what its folder holds (its meta file or only a CLI report)."""
        meta = _read_json(folder / META_FILE)
        report = _read_json(folder / "report.json")
        if meta is None and report is None:
            return None
        run = cls(folder.name, folder)
        for key, value in (meta or {}).items():
            if key in run.meta():
                setattr(run, key, value)
        if meta is None and report is not None:
            run.name = report.get("name")
            with contextlib.suppress(TypeError, ValueError):
                started = dt.datetime.fromisoformat(str(report.get("started_at")))
                run.started_at = int(started.timestamp() * 1000)
        if run.status in ACTIVE:  # the API that ran it ended first
            run.status = "failed"
            run.error = run.error or "the API stopped while this load test ran"
        return run

    def to_dict(self, *, detail: bool = False, private: bool = False) -> dict[str, Any]:
        """The run as the API shows it: with `detail` its full report and chart specs; the
        child's stderr tail only with `private` (the control token)."""
        report = _read_json(self.folder / "report.json")
        body: dict[str, Any] = {
            "run_id": self.run_id,
            **self.meta(),
            "error": self.error if private else None,
            "progress": _read_json(self.folder / PROGRESS_FILE),
            "summary": {k: report.get(k) for k in SUMMARY_KEYS} if report else None,
            "report": report if detail else None,
            "charts": charts_of(self.folder) if detail and report else [],
        }
        return body


class LoadTestManager:
    def __init__(
        self,
        reports_dir: Path,
        *,
        stack: StackConfig | None = None,
        loadtest_dir: Path | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        stop_timeout_s: float = 10.0,
        check_timeout_s: float = 60.0,
        keep: int = 200,
        command: Callable[[Path, Path | None, Path], list[str]] = loadtest_command,
        check: Callable[[Path], list[str]] = check_command,
    ) -> None:
        """`command` and `check` replace the child commands (tests)."""
        self.reports_dir = Path(reports_dir)
        self.stack = stack
        self.loadtest_dir = Path(loadtest_dir) if loadtest_dir else default_loadtest_dir()
        base_env = dict(os.environ if env is None else env)
        self.env = {k: v for k, v in base_env.items() if k not in SECRET_ENV}
        self.cwd = cwd
        self.stop_timeout_s = stop_timeout_s
        self.check_timeout_s = check_timeout_s
        self.keep = keep
        self.command = command
        self.check = check
        self._active: dict[str, LoadTestRun] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_stack(cls, stack: StackConfig, **kwargs: Any) -> LoadTestManager:
        """Reports under `<dirs.data>/loadtests`, where `streamsim loadtest` writes them."""
        return cls(Path(stack.dirs.data) / "loadtests", stack=stack, **kwargs)

    # -- files --------------------------------------------------------------------------------

    def files(self) -> dict[str, Path]:
        if not self.loadtest_dir.is_dir():
            return {}
        return {p.stem: p for p in sorted(self.loadtest_dir.glob("*.yaml"))}

    def describe_files(self) -> list[dict[str, Any]]:
        """Each load-test file: name, target type, its editable part as written, or its error."""
        out = []
        for name, path in self.files().items():
            entry: dict[str, Any] = {"name": name, "file": str(path), "target": None}
            try:
                data = read_yaml(path)
                target = data.get("target")
                entry["target"] = (
                    str(target.get("type", "http")) if isinstance(target, Mapping) else "http"
                )
                entry.update(editable=editable(data), error=None)
            except ConfigError as exc:
                entry.update(editable={}, error=str(exc))
            out.append(entry)
        return out

    @staticmethod
    def tunable() -> list[str]:
        return TunableKeys("loadtest", (), TUNABLE).dotted()

    # -- runs ---------------------------------------------------------------------------------

    def start(self, file: str, edits: Mapping[str, Any] | None = None) -> LoadTestRun:
        edits = dict(edits or {})
        path = self.files().get(file)
        if path is None:
            known = ", ".join(self.files()) or "none"
            raise UnknownLoadTest(
                f"no load test {scrub_text(repr(file))} in {self.loadtest_dir}; known: {known}"
            )
        problems = TunableKeys("loadtest", (), TUNABLE).check(edits)
        if problems:
            raise InvalidEdits(problems)
        data = deep_merge(read_yaml(path), edits)
        name = str(data.get("name") or file)
        if not _NAME.match(name):
            name = file
        self._check_conflict()
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        run_id = f"{name}-{stamp}-{secrets.token_hex(3)}"
        folder = self.reports_dir / run_id
        folder.mkdir(parents=True, exist_ok=True)
        merged = folder / "loadtest.yaml"
        merged.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        try:
            self._validate(merged)
        except BaseException:
            for leftover in folder.iterdir():
                leftover.unlink()
            folder.rmdir()
            raise
        stack_file, env = self._write_stack(folder)
        with self._lock:
            self._check_conflict(locked=True)
            run = LoadTestRun(run_id, folder, file=file, name=name, status="running")
            run.started_at, run.edits = now_ms(), edits
            with (folder / STDOUT).open("ab") as out, (folder / STDERR).open("ab") as err:
                run.proc = spawn(
                    self.command(merged, stack_file, folder),
                    stdout=out,
                    stderr=err,
                    env=env,
                    cwd=self.cwd,
                )
            run.pid = run.proc.pid
            self._active[run_id] = run
            self._save(run)
        threading.Thread(
            target=self._supervise, args=(run,), name=f"loadtest-{run_id}", daemon=True
        ).start()
        return run

    def _check_conflict(self, *, locked: bool = False) -> None:
        with contextlib.nullcontext() if locked else self._lock:
            for run in self._active.values():
                if run.status in ACTIVE:
                    raise LoadTestConflict(run)

    def _validate(self, merged: Path) -> None:
        """The load-test model's verdict on the merged file (`InvalidEdits` naming the keys)."""
        done = subprocess.run(
            self.check(merged),
            capture_output=True,
            env=self.env,
            cwd=self.cwd,
            timeout=self.check_timeout_s,
            check=False,
        )
        if done.returncode != 0:
            message = done.stderr.decode("utf-8", "replace") or f"exit {done.returncode}"
            raise InvalidEdits(config_problems(message, merged))

    def _write_stack(self, folder: Path) -> tuple[Path | None, dict[str, str]]:
        """The API's stack for the child, its Kafka client secrets in the environment only."""
        if self.stack is None:
            return None, dict(self.env)
        stack, client_secrets = split_client_secrets(self.stack)
        stack_file = folder / "stack.yaml"
        stack_file.write_text(yaml.safe_dump(stack, sort_keys=False), encoding="utf-8")
        env = dict(self.env)
        if client_secrets:
            env[KAFKA_CLIENT_ENV] = orjson.dumps(client_secrets).decode()
        return stack_file, env

    def _save(self, run: LoadTestRun) -> None:
        part = run.folder / f"{META_FILE}.part"
        part.write_bytes(orjson.dumps(run.meta()))
        os.replace(part, run.folder / META_FILE)

    def _supervise(self, run: LoadTestRun) -> None:
        """Wait for the child; its end decides the status: a report written (exit 0, or 1 for
        a failed SLO) is `finished`, none is `failed` with its stderr tail; asked to stop is
        `stopped`."""
        assert run.proc is not None
        code = run.proc.wait()
        kill_group(run.pid, signal.SIGKILL)  # whatever it left in its group
        with self._lock:
            run.exit_code, run.ended_at = code, now_ms()
            if run.stop_requested:
                run.status = "stopped"
            elif (run.folder / "report.json").is_file() and code in (0, 1):
                run.status = "finished"
            else:
                run.status = "failed"
                run.error = tail(run.folder / STDERR) or f"exited with code {code}"
            self._save(run)
        run.done.set()

    def stop(self, run_id: str) -> LoadTestRun:
        """SIGINT to the child's group, SIGKILL after `stop_timeout_s`; returns once it ended."""
        run = self.get(run_id)
        with self._lock:
            if run.status not in ACTIVE or run.proc is None:
                return run
            run.stop_requested, run.status = True, "stopping"
        kill_group(run.pid, signal.SIGINT)
        if not run.done.wait(self.stop_timeout_s):
            kill_group(run.pid, signal.SIGKILL)
            run.done.wait(10.0)
        wait_group_gone(run.pid, 5.0)
        return run

    def get(self, run_id: str) -> LoadTestRun:
        with self._lock:
            run = self._active.get(run_id)
        if run is not None:
            return run
        folder = self.reports_dir / run_id
        found = LoadTestRun.from_folder(folder) if _NAME.match(run_id) and folder.is_dir() else None
        if found is None:
            raise UnknownLoadTest(f"no load test run {scrub_text(repr(run_id))}")
        return found

    def list(self) -> list[LoadTestRun]:
        """Every run with a folder under `reports_dir` (the panel's and the CLI's), newest
        first; the last `keep`."""
        with self._lock:
            active = dict(self._active)
        runs = list(active.values())
        if self.reports_dir.is_dir():
            for folder in self.reports_dir.iterdir():
                if folder.name not in active and folder.is_dir():
                    found = LoadTestRun.from_folder(folder)
                    if found is not None:
                        runs.append(found)
        runs.sort(key=lambda r: (r.started_at or 0, r.run_id), reverse=True)
        return runs[: self.keep]

    def close(self) -> None:
        """Stop what is running (on API shutdown)."""
        for run in [r for r in self._active.values() if r.status in ACTIVE]:
            self.stop(run.run_id)
