"""Lake-full fault: cards's Parquet lake becomes unwritable mid-run, then recovers;
its alerts must match an uninterrupted run of the same input, none lost or written twice.

On a private broker, two `streamsim pipeline run cards` jobs read the simulator's
input at once, each with its own checkpoints, lake and output topics (`driver.job_run`): the
faulted one and the uninterrupted reference (the long watermark of `driver.WATERMARK` makes
their batch boundaries irrelevant). Before the simulator starts, the faulted job's lake folder
moves aside and a regular file takes its name: every write below it fails with ENOTDIR,
whoever the process runs as (root ignores permission bits and a read-only mode, not a file
where a folder should be). After `outage_s`, and once the job has said its lake is unwritable
(its first batch with alerts tried to write: alerts come once the watermark passes them, so
late in the input), the folder comes back.

The job's alerts sink holds the batch while the lake is unwritable (`AlertSink._write_lake`):
its log must name the path and the OS error, then say when the batch was written.
`recovery_s` runs from blocking the lake until that batch is written.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from core.config import StackConfig
from core.errors import StreamsimError
from core.kafka.admin import ensure_topics
from streamsim.chaos.broker import private_stack
from streamsim.chaos.driver import (
    DRAIN_TIMEOUT_S,
    JobRun,
    Producing,
    compare_runs,
    job_run,
    require_card_scenario,
)
from streamsim.chaos.report import ChaosReport
from streamsim.kafka.broker import LocalBroker

if TYPE_CHECKING:
    from scenarios.catalog import ScenarioConfig

FAULT = "lake-full"
#: The job's lines about its lake (`pipeline.alerts_sink`).
UNWRITABLE = re.compile(r"^.*alerts lake unwritable: .*$", re.MULTILINE)
WRITABLE = re.compile(r"^.*alerts lake writable again after .*$", re.MULTILINE)
#: How long the lake stays blocked past `outage_s` waiting for a batch to try to write (the
#: first alerts come once the watermark passes them, after most of the input).
HOLD_MAX_S = 600.0


def block(folder: Path) -> Path:
    """Make `folder` unwritable for anyone: move it aside and put a file in its place."""
    aside = folder.with_name(f"{folder.name}.blocked")
    folder.mkdir(parents=True, exist_ok=True)
    folder.rename(aside)
    folder.write_text("chaos lake-full: the lake is unwritable until this file goes\n")
    return aside


def unblock(folder: Path, aside: Path) -> None:
    folder.unlink()
    aside.rename(folder)


def _hold(run: JobRun, until: float) -> str | None:
    """Keep the lake blocked until `until`, and past it until the job said it is unwritable
    (at most `HOLD_MAX_S` more); the job's line, if it said so."""
    said: re.Match[str] | None = None
    while time.monotonic() < until or (said is None and time.monotonic() < until + HOLD_MAX_S):
        run.alive()
        said = said or UNWRITABLE.search(run.log_text())
        time.sleep(0.2)
    return said.group(0).strip() if said else None


def _wait_written(run: JobRun) -> str | None:
    """Until the job said the held batch is written; that line, or None at the timeout."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while time.monotonic() < deadline:
        run.alive()
        written = WRITABLE.search(run.log_text())
        if written:
            return written.group(0).strip()
        time.sleep(0.2)
    return None


def run_lake_fault(
    config: ScenarioConfig,
    stack: StackConfig,
    *,
    events: int = 12_000,
    speed: float | str | None = 300.0,
    outage_s: float = 5.0,
    seed: int | None = None,
    keep: bool = False,
) -> ChaosReport:
    """Run cards twice on `config`'s input, block the first run's lake for
    `outage_s` mid-run, and compare its alerts with the second, uninterrupted, run's."""
    require_card_scenario(config, FAULT)
    topic = str(config.domain.topic)
    stack.dirs.data.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix=f"chaos-{FAULT}-", dir=stack.dirs.data)).resolve()
    private = private_stack(stack, 1, home)
    broker = LocalBroker(private)
    runs: list[JobRun] = []
    notes: list[str] = []
    aside: Path | None = None
    try:
        broker.up()
        ensure_topics(private, [topic])
        faulted = job_run("faulted", private, home)
        reference = job_run("reference", private, home)
        runs += [faulted, reference]
        for run in runs:
            run.start()
        for run in runs:
            run.wait_started()
        lake = faulted.stack.dirs.lake
        aside = block(lake)
        blocked_at = time.monotonic()
        producing = Producing(config, private, events, speed, seed)
        producing.thread.start()
        said = _hold(faulted, blocked_at + outage_s)
        unblock(lake, aside)
        aside = None
        notes.append(f"the lake {lake} was a file for {time.monotonic() - blocked_at:.1f}s")
        written = None
        recovery_s = float("nan")
        not_injected = None
        if said is None:
            not_injected = (
                f"no batch tried to write while the lake was blocked "
                f"({outage_s:.0f}s + {HOLD_MAX_S:.0f}s): the job raised no alert in that time"
            )
            notes.append(not_injected)
        else:
            notes.append(f"the job said: {said}")
            written = _wait_written(faulted)
            if written is None:
                notes.append("the job never wrote the held batch")
            else:
                recovery_s = time.monotonic() - blocked_at
                notes.append(f"the job said: {written}")
        producing.thread.join()
        if producing.error is not None:
            raise StreamsimError(f"the simulator failed: {producing.error}") from producing.error
        for run in runs:
            run.wait_drained(topic, None)
            run.stop()
        if "Traceback" in faulted.log_text():
            notes.append("the faulted job's log holds a Python traceback")

        tally, matched = compare_runs(reference, faulted, notes)
        summary = producing.summary
        if summary.failed:
            notes.append(f"the simulator failed to send {summary.failed} records")
        if not_injected is None and tally.expected == 0:
            not_injected = "the uninterrupted run raised no alert, so there was nothing to compare"
        ok = (
            said is not None
            and written is not None
            and matched
            and summary.failed == 0
            and "Traceback" not in faulted.log_text()
        )
        return ChaosReport(
            scenario=config.name,
            fault=FAULT,
            sent=summary.events,
            lost=tally.lost,
            unexpected_duplicates=tally.extra_copies,
            duplicate_alert_ids=tally.duplicate_ids,
            recovery_s=recovery_s,
            ok=ok,
            notes=notes,
            not_injected=not_injected,
        )
    finally:
        if aside is not None:
            unblock(faulted.stack.dirs.lake, aside)
        for run in runs:
            run.reap()
        broker.down()
        if not keep:
            shutil.rmtree(home, ignore_errors=True)
