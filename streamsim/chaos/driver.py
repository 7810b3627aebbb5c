"""Driver fault: kill -9 a Spark job's driver mid-batch, restart it from its checkpoint, and
compare its alerts with an uninterrupted run of the same input.

On a private broker (`broker.private_stack`), `streamsim pipeline run cards` starts
with its own checkpoints, lake and output topics; the simulator then produces into its input
topic. Once the alerts query has committed a batch and is running the next (watched in the
checkpoint's `offsets`/`commits`), the driver's whole process group (Python and the JVM) gets
SIGKILL, and the simulator sends the rest of its input as fast as it can (the pace only has to
keep it sending until the kill); after `outage_s` the job starts again from the same checkpoint
and drains the input.
A second job with fresh checkpoints, lake and topics then reads the same input uninterrupted.
Every alert id of that run must be once in the faulted run's topic and once in its lake.

Both runs use a watermark far longer than the scenario's lateness (`WATERMARK`), so no event
is dropped as late in either: batch boundaries (which differ between a run that reads while
the simulator produces and one that reads everything at once) then cannot change the alerts.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from core.config import StackConfig
from core.errors import StreamsimError
from core.kafka.admin import ensure_topics
from core.kafka.offsets import end_offsets
from core.kafka.reader import read_topic
from runs import commands
from runs.process import kill_group
from streamsim.bench.api import ServerProcess
from streamsim.chaos.alerts import AlertTally, tally_alerts
from streamsim.chaos.broker import private_stack
from streamsim.chaos.checkpoint import batch_state, covers, source_offsets
from streamsim.chaos.report import ChaosReport
from streamsim.kafka.broker import LocalBroker
from streamsim.stackfile import write_stack_file

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from scenarios.catalog import ScenarioConfig
    from simulators import Progress

JOB = "cards"
PIPELINE_FILE = Path("config/pipelines") / f"{JOB}.yaml"
#: Longer than the lateness of any event of the card scenario (store-and-forward spells of
#: about an hour at most), so neither run drops one as late.
WATERMARK = "2 hours"
#: The job is drained once its alerts query read every input offset and planned nothing new
#: for this long (a last batch without data may follow to move the watermark).
SETTLE_S = 10.0
START_TIMEOUT_S = 300.0
#: The line `streamsim pipeline run` prints once its queries run.
STARTED = re.compile(r"^started \d+ queries:", re.MULTILINE)
DRAIN_TIMEOUT_S = 600.0


@dataclass
class JobRun:
    """One `streamsim pipeline run` child of the fault: its files, topics and process."""

    name: str
    home: Path
    stack: StackConfig
    env: dict[str, str]
    stack_file: Path
    pipeline_file: Path
    output_topic: str
    proc: ServerProcess | None = None
    starts: int = 0

    @property
    def checkpoint(self) -> Path:
        return self.stack.dirs.checkpoints / JOB / "alerts"

    def start(self) -> None:
        self.starts += 1
        command = commands.streamsim(
            "pipeline", "run", JOB, "--pipeline", str(self.pipeline_file),
            "--config", str(self.stack_file),
        )  # fmt: skip
        self.proc = ServerProcess(
            f"{self.name} job", command, self.home / f"{self.name}.log", self.env
        )

    def wait_started(self) -> None:
        """Until the job printed its queries (the JVM is up, the queries run)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            self.alive()
            if len(STARTED.findall(self.log_text())) >= self.starts:
                return
            time.sleep(0.2)
        raise StreamsimError(f"the {self.name} job did not start:\n{self.tail()}")

    def alive(self) -> None:
        assert self.proc is not None
        self.proc.check_alive()

    def log_text(self) -> str:
        path = self.home / f"{self.name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def tail(self) -> str:
        return self.log_text()[-3000:]

    def kill(self) -> None:
        """SIGKILL the job's process group: the Python driver and its JVM at once."""
        assert self.proc is not None
        kill_group(self.proc.proc.pid, signal.SIGKILL)
        self.proc.proc.wait(30)

    def stop(self) -> None:
        """Ctrl-C (the job stops its queries), then SIGKILL if it hangs."""
        if self.proc is None or self.proc.proc.poll() is not None:
            return
        self.proc.proc.send_signal(signal.SIGINT)
        try:
            self.proc.proc.wait(90)
        except subprocess.TimeoutExpired:
            self.kill()

    def reap(self) -> None:
        """Make sure nothing of the job outlives the fault (its group, JVM included)."""
        if self.proc is None:
            return
        kill_group(self.proc.proc.pid, signal.SIGKILL)
        self.proc.proc.wait(30)

    def wait_drained(self, topic: str, producing: threading.Thread | None) -> None:
        """Until the alerts query committed every offset of `topic` and stayed idle."""
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        idle_since: float | None = None
        last: Any = None
        while time.monotonic() < deadline:
            self.alive()
            state = batch_state(self.checkpoint)
            done = (
                (producing is None or not producing.is_alive())
                and state.committed is not None
                and state.running is None
                and covers(
                    source_offsets(self.checkpoint, state.committed),
                    topic,
                    end_offsets(self.stack, topic),
                )
            )
            if done and state == last and idle_since is not None:
                if time.monotonic() - idle_since >= SETTLE_S:
                    return
            else:
                idle_since = time.monotonic() if done else None
            last = state
            time.sleep(0.5)
        raise StreamsimError(f"the {self.name} job did not drain {topic}:\n{self.tail()}")

    def alert_ids(self) -> tuple[list[str], list[str]]:
        """Alert ids in this run's topic and in its lake, one entry per copy."""
        from pipeline.alerts_sink import read_lake

        topic = [str(r["alert_id"]) for r in read_topic(self.stack, self.output_topic)]
        lake = [str(i) for i in read_lake(self.stack.dirs.lake, JOB)["alert_id"]]
        return topic, lake


def require_card_scenario(config: ScenarioConfig, fault: str) -> None:
    """The driver and endpoint faults run on card transactions sent to Kafka."""
    domain = config.domain
    if domain.type != "cards" or domain.delivery != "kafka":
        raise StreamsimError(
            f"--fault {fault} needs a cards scenario with domain.delivery: kafka, "
            f"not {config.name!r}"
        )


def job_run(name: str, private: StackConfig, home: Path) -> JobRun:
    """A job run with its own checkpoints, lake and output topics on the private broker."""
    root = home / name
    root.mkdir(parents=True)
    stack = private.model_copy(
        update={
            "dirs": private.dirs.model_copy(
                update={"checkpoints": root / "checkpoints", "lake": root / "lake"}
            )
        }
    )
    data = yaml.safe_load(PIPELINE_FILE.read_text(encoding="utf-8"))
    data.update(
        output_topic=f"alerts.{name}",
        deadletter_topic=f"deadletter.{name}",
        watermark=WATERMARK,
    )
    data["cards"]["features_topic"] = f"aggregates.card-features.{name}"
    from pipeline.config import PipelineConfig

    PipelineConfig.model_validate(data)  # fail here, not in the child
    pipeline_file = root / "pipeline.yaml"
    pipeline_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    stack_file = root / "stack.yaml"
    env = write_stack_file(stack, stack_file)
    env["PYTHONUNBUFFERED"] = "1"  # the "started" line must reach the log at once
    ensure_topics(
        stack,
        [data["output_topic"], data["deadletter_topic"], data["cards"]["features_topic"]],
    )
    return JobRun(name, root, stack, env, stack_file, pipeline_file, data["output_topic"])


def compare_runs(reference: JobRun, faulted: JobRun, notes: list[str]) -> tuple[AlertTally, bool]:
    """The faulted run's alerts (topic and lake) against the uninterrupted run's, noted in
    `notes`; and whether they match: the uninterrupted run raised alerts, its topic and lake
    agree, and the faulted run has each of them once and no other."""
    ref_topic, ref_lake = reference.alert_ids()
    got_topic, got_lake = faulted.alert_ids()
    tally = tally_alerts(ref_topic, got_topic, got_lake)
    notes.append(
        f"uninterrupted run: {tally.expected} alerts ({len(ref_topic)} in its topic, "
        f"{len(ref_lake)} in its lake); faulted run: {len(got_topic)} in the topic, "
        f"{len(got_lake)} in the lake"
    )
    consistent = set(ref_topic) == set(ref_lake)
    if not consistent:
        notes.append("the uninterrupted run's topic and lake differ")
    if tally.unexpected:
        notes.append(f"{tally.unexpected} alert ids the uninterrupted run did not raise")
    if tally.expected == 0:
        notes.append("the uninterrupted run raised no alert: nothing was compared")
    matched = (
        consistent
        and tally.expected > 0
        and tally.lost == 0
        and tally.duplicate_ids == 0
        and tally.unexpected == 0
    )
    return tally, matched


class Hurry:
    """A pacing control (`simulators.pacing.ControlFn`): once `go()` was called, the rest of
    the input is sent as fast as possible (the stream's content does not change)."""

    def __init__(self) -> None:
        self._go = threading.Event()
        self._sent = False

    def go(self) -> None:
        self._go.set()

    def __call__(self) -> dict[str, Any] | None:
        if self._sent or not self._go.is_set():
            return None
        self._sent = True
        return {"speed": "max", "max_rate": None}


@dataclass
class Producing:
    """The simulator in a thread, into the private broker."""

    config: ScenarioConfig
    stack: StackConfig
    events: int
    speed: float | str | None
    seed: int | None
    progress: Callable[[Progress], None] | None = None
    control: Callable[[], Mapping[str, Any] | None] | None = None
    summary: Any = None
    error: BaseException | None = None
    thread: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, name="simulator", daemon=True)

    def _run(self) -> None:
        from scenarios.catalog import run_scenario
        from simulators.sinks.kafka import KafkaSink

        try:
            self.summary = run_scenario(
                self.config,
                KafkaSink(self.stack, tag_sends=True, log_level=0),
                events=self.events,
                speed=self.speed,
                seed=self.seed,
                progress=self.progress,
                stack=self.stack,
                control=self.control,
            )
        except BaseException as exc:  # reported, never swallowed
            self.error = exc


def run_driver_fault(
    config: ScenarioConfig,
    stack: StackConfig,
    *,
    events: int = 12_000,
    speed: float | str | None = 300.0,
    outage_s: float = 5.0,
    seed: int | None = None,
    keep: bool = False,
) -> ChaosReport:
    """Run cards while `config` produces, kill -9 its driver mid-batch, restart it
    from the checkpoint, and compare its alerts with an uninterrupted run of the same input.

    Not injected (`ChaosReport.not_injected`) when the simulator finished before the job
    committed a batch and started the next, or when the uninterrupted run raised no alert."""
    require_card_scenario(config, "driver")
    topic = str(config.domain.topic)
    stack.dirs.data.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="chaos-driver-", dir=stack.dirs.data)).resolve()
    private = private_stack(stack, 1, home)
    broker = LocalBroker(private)
    runs: list[JobRun] = []
    notes: list[str] = []
    try:
        broker.up()
        ensure_topics(private, [topic])
        faulted = job_run("faulted", private, home)
        runs.append(faulted)
        faulted.start()
        faulted.wait_started()
        sent: list[int] = [0]  # events handed to the producer so far
        hurry = Hurry()  # once the driver is killed, the rest of the input comes at once
        producing = Producing(
            config,
            private,
            events,
            speed,
            seed,
            progress=lambda p: sent.__setitem__(0, p.events),
            control=hurry,
        )
        started_at = time.monotonic()
        producing.thread.start()

        killed_at = recovered_at = None
        killed_batch = None
        not_injected = None
        while producing.thread.is_alive() and killed_at is None:
            faulted.alive()
            state = batch_state(faulted.checkpoint)
            if state.mid_batch:
                faulted.kill()
                killed_at, killed_batch = time.monotonic(), state.running
                hurry.go()
            time.sleep(0.05)
        if killed_at is None:
            not_injected = (
                f"the simulator sent all {events:,} events in "
                f"{time.monotonic() - started_at:.0f}s, before the job committed a batch and "
                "started the next: nothing was killed (give it longer: fewer --entities or a "
                "lower --speed)"
            )
            notes.append(not_injected)
        else:
            notes.append(
                f"killed the driver while batch {killed_batch} ran, "
                f"{killed_at - started_at:.0f}s after the simulator started, with "
                f"{sent[0]:,} of {events:,} events sent"
            )
            time.sleep(outage_s)
            faulted.start()
            deadline = time.monotonic() + START_TIMEOUT_S + DRAIN_TIMEOUT_S
            while recovered_at is None and time.monotonic() < deadline:
                faulted.alive()
                committed = batch_state(faulted.checkpoint).committed
                if committed is not None and killed_batch is not None and committed >= killed_batch:
                    recovered_at = time.monotonic()
                time.sleep(0.2)
            if recovered_at is None:
                notes.append(f"the restarted job never committed batch {killed_batch}")
        producing.thread.join()
        if producing.error is not None:
            raise StreamsimError(f"the simulator failed: {producing.error}") from producing.error
        faulted.wait_drained(topic, producing.thread)
        faulted.stop()

        reference = job_run("reference", private, home)
        runs.append(reference)
        reference.start()
        reference.wait_started()
        reference.wait_drained(topic, None)
        reference.stop()

        tally, matched = compare_runs(reference, faulted, notes)
        summary = producing.summary
        if summary.failed:
            notes.append(f"the simulator failed to send {summary.failed} records")
        ok = killed_at is not None and recovered_at is not None and matched and summary.failed == 0
        if not_injected is None and tally.expected == 0:
            not_injected = "the uninterrupted run raised no alert, so there was nothing to compare"
        return ChaosReport(
            scenario=config.name,
            fault="driver",
            sent=summary.events,
            lost=tally.lost,
            unexpected_duplicates=tally.extra_copies,
            duplicate_alert_ids=tally.duplicate_ids,
            recovery_s=(
                recovered_at - killed_at
                if recovered_at is not None and killed_at is not None
                else float("nan")
            ),
            ok=ok,
            notes=notes,
            not_injected=not_injected,
        )
    finally:
        for run in runs:
            run.reap()
        broker.down()
        if not keep:
            shutil.rmtree(home, ignore_errors=True)
