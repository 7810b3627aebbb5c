"""Endpoint fault: kill -9 the fraud endpoint under load, restart it, and check its decisions.

On a private broker and a free port, `streamsim api` gets a seeded card stream (the load
test's payloads: ordinary use, impossible travel, card testing) from `WORKERS` concurrent
clients. Once half the stream is answered, its process group gets SIGKILL; after `outage_s`
it starts again and rebuilds its state from `cards.activity`. Then:

1. the topic as the killed endpoint left it is read: each decision answered 200 before the
   kill and missing there is lost (`acks.tally_acks` measures how long before the kill each
   was answered);
2. every transaction answered before the kill is sent again: those in the topic must get the
   same answer byte for byte (the verdict cache is rebuilt from the topic);
3. the rest of the stream is sent, the endpoint stopped (it flushes), and every 200 since the
   restart must be in the topic, each transaction once.

The endpoint runs with `durability` (`api.fraud.durability`; the endpoint's default, `ack`,
unless `--durability` says otherwise). Under `ack` and `log` the fault is ok only if no
decision answered 200 is missing from the topic after the restart (`log`: once its write-ahead
log is replayed, before it is live again). Under `none` the endpoint answers before its
decision is acknowledged by the broker (records linger `api.fraud.publisher.LINGER_MS` to be
batched): only decisions answered in that last window before a kill -9 may be lost;
`LOSS_WINDOW_S` bounds it with a margin for the broker round trip on a loaded machine. Any
other loss fails the fault.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, get_args

import httpx
import numpy as np
import yaml

from api.fraud.publisher import LINGER_MS
from api.fraud.settings import ApiSettings
from core.config import StackConfig
from core.contracts import topics
from core.errors import StreamsimError
from core.kafka.admin import ensure_topics
from core.kafka.reader import read_topic
from core.ports import free_port
from runs import commands
from runs.process import kill_group
from streamsim.bench.api import ServerProcess, wait_ready
from streamsim.chaos.acks import Answer, tally_acks
from streamsim.chaos.broker import private_stack
from streamsim.chaos.driver import require_card_scenario
from streamsim.chaos.report import ChaosReport
from streamsim.kafka.broker import LocalBroker
from streamsim.loadtest.config import PayloadMix
from streamsim.loadtest.payloads import build_payloads
from streamsim.stackfile import write_stack_file

if TYPE_CHECKING:
    from scenarios.catalog import ScenarioConfig

#: Concurrent clients of the load.
WORKERS = 4
#: Decisions answered this long before a kill -9 are in the topic: the publish linger plus a
#: margin for the send and the broker's acknowledgement on a loaded machine.
LOSS_WINDOW_S = LINGER_MS / 1000 + 0.4
PAN_SECRET = "chaos-endpoint-pan-secret-0123456789"  # only for the private endpoint's run
#: The endpoint's `durability` values, and its default.
DURABILITIES: tuple[str, ...] = get_args(ApiSettings.model_fields["durability"].annotation)
DEFAULT_DURABILITY = str(ApiSettings.model_fields["durability"].default)


@dataclass
class Load:
    """Posts the bodies of given indexes from `WORKERS` threads until done or `halt` is set;
    keeps each 200 with its arrival time. A worker stops at its first connection error."""

    url: str
    bodies: list[bytes]
    ids: list[str]
    answers: list[Answer] = field(default_factory=list)
    unanswered: list[int] = field(default_factory=list)  # sent, no answer (killed mid-request)
    statuses: Counter[int] = field(default_factory=Counter)
    halt: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, indexes: list[int], *, background: bool = False) -> list[threading.Thread]:
        queue = iter(indexes)
        threads = [
            threading.Thread(target=self._worker, args=(queue,), daemon=True)
            for _ in range(WORKERS)
        ]
        for thread in threads:
            thread.start()
        if not background:
            for thread in threads:
                thread.join()
        return threads

    def _take(self, queue: Iterator[int]) -> int | None:
        with self._lock:
            return next(queue, None)

    def _worker(self, queue: Iterator[int]) -> None:
        headers = {"content-type": "application/json"}
        with httpx.Client(base_url=self.url, timeout=30) as client:
            while not self.halt.is_set():
                i = self._take(queue)
                if i is None:
                    return
                try:
                    response = client.post(
                        "/v1/transactions", content=self.bodies[i], headers=headers
                    )
                except httpx.TransportError:
                    with self._lock:
                        self.unanswered.append(i)
                    return
                at = time.monotonic()
                with self._lock:
                    self.statuses[response.status_code] += 1
                    if response.status_code == 200:
                        self.answers.append(Answer(self.ids[i], response.content, at))

    def answered(self) -> int:
        with self._lock:
            return len(self.answers)


def private_endpoint_stack(stack: StackConfig, home: Path) -> tuple[StackConfig, str]:
    """A private broker's stack (`broker.private_stack`) with the API on a free port; its URL."""
    private = private_stack(stack, 1, home)
    private = private.model_copy(
        update={"api": private.api.model_copy(update={"port": free_port(private.api.host)})}
    )
    return private, f"http://{private.api.host}:{private.api.port}"


def endpoint_files(
    private: StackConfig, home: Path, topic: str, durability: str = DEFAULT_DURABILITY
) -> tuple[Path, Path, dict[str, str]]:
    """The private endpoint's stack file, settings file (POS mode: decisions to `topic`, no
    profiles, `durability`) and environment, in `home`."""
    stack_file = home / "stack.yaml"
    env = write_stack_file(private, stack_file)
    env["STREAMSIM_PAN_SECRET"] = PAN_SECRET
    settings_file = home / "api.yaml"
    settings_file.write_text(
        yaml.safe_dump({"kind": "api", "topic": topic, "profiles_topic": None,
                        "rebuild_timeout_s": 120.0, "durability": durability}),
        encoding="utf-8",
    )  # fmt: skip
    return stack_file, settings_file, env


def seeded_requests(events: int, seed: int) -> tuple[list[str], list[bytes]]:
    """Transaction ids and bodies of a seeded card stream (the load test's payloads: ordinary
    use, impossible travel, card testing), event times 10 ms apart from now."""
    times_s = np.arange(events, dtype=np.float64) * 0.01
    payloads = build_payloads(PayloadMix(invalid_share=0.0), times_s, seed)
    ids = [f"chaos-{seed}-{i}" for i in range(events)]
    base_ms = time.time_ns() // 1_000_000
    bodies = [payloads.body(i, ids[i], base_ms + round(t * 1000)) for i, t in enumerate(times_s)]
    return ids, bodies


def endpoint_server(
    home: Path, stack_file: Path, settings_file: Path, env: dict[str, str]
) -> ServerProcess:
    command = commands.api(stack_file, settings_file)
    return ServerProcess("fraud endpoint", command, home / "endpoint.log", env)


def live(url: str) -> bool:
    health = httpx.get(f"{url}/v1/health", timeout=2).json()
    return bool(health["state"]["status"] == "live")


def activity_ids(stack: StackConfig, topic: str) -> Counter[str]:
    return Counter(str(r.get("transaction_id")) for r in read_topic(stack, topic))


class EndpointRig:
    """A private broker and a POS-mode endpoint on it (decisions to `cards.activity`), in a
    temporary home under the stack's data dir, with `events` seeded card requests: where the
    endpoint and slow-broker faults start. Leaving it stops both and removes the home unless
    `keep`."""

    def __init__(
        self,
        stack: StackConfig,
        fault: str,
        events: int,
        seed: int,
        keep: bool,
        durability: str = DEFAULT_DURABILITY,
    ) -> None:
        self.durability = durability
        stack.dirs.data.mkdir(parents=True, exist_ok=True)
        self.home = Path(tempfile.mkdtemp(prefix=f"chaos-{fault}-", dir=stack.dirs.data)).resolve()
        self.private, self.url = private_endpoint_stack(stack, self.home)
        self.topic = topics.CARDS_ACTIVITY.name
        self.ids, self.bodies = seeded_requests(events, seed)
        self.keep = keep
        self.server: ServerProcess | None = None
        self._broker = LocalBroker(self.private)

    def __enter__(self) -> EndpointRig:
        try:
            self._broker.up()
            ensure_topics(self.private, [self.topic])
            self._files = endpoint_files(self.private, self.home, self.topic, self.durability)
        except BaseException:
            self.__exit__()
            raise
        return self

    def start(self) -> ServerProcess:
        """Start the endpoint (again: after a kill) and wait until it is live."""
        self.server = endpoint_server(self.home, *self._files)
        wait_ready(self.server, lambda: live(self.url))
        return self.server

    def load(self) -> Load:
        return Load(self.url, self.bodies, self.ids)

    def __exit__(self, *exc: object) -> None:
        if self.server is not None:
            self.server.stop()
        self._broker.down()
        if not self.keep:
            shutil.rmtree(self.home, ignore_errors=True)


def run_endpoint_fault(
    config: ScenarioConfig,
    stack: StackConfig,
    *,
    events: int = 5_000,
    outage_s: float = 5.0,
    seed: int | None = None,
    keep: bool = False,
    durability: str = DEFAULT_DURABILITY,
) -> ChaosReport:
    """Post a seeded card stream of `events` transactions to a private endpoint (with
    `durability`), kill -9 it half way, restart it, replay what it answered, send the rest,
    and account for every 200."""
    require_card_scenario(config, "endpoint")
    if durability not in DURABILITIES:
        raise StreamsimError(f"durability {durability!r}: one of {', '.join(DURABILITIES)}")
    run_seed = config.seed if seed is None else seed
    notes: list[str] = [f"durability: {durability}"]
    with EndpointRig(stack, "endpoint", events, run_seed, keep, durability) as rig:
        private, topic, ids, server = rig.private, rig.topic, rig.ids, rig.start()
        load = rig.load()
        threads = load.run(list(range(events)), background=True)
        while load.answered() < events // 2:
            server.check_alive()
            if not any(t.is_alive() for t in threads):
                raise StreamsimError(f"the load ended early: {dict(load.statuses)}")
            time.sleep(0.001)
        killed_at = time.monotonic()
        kill_group(server.proc.pid, signal.SIGKILL)
        server.proc.wait(30)
        load.halt.set()
        for thread in threads:
            thread.join(60)
        before = list(load.answers)
        sent_before = len(before) + len(load.unanswered)

        time.sleep(outage_s)
        server = rig.start()
        recovery_s = time.monotonic() - killed_at
        survived = activity_ids(private, topic)  # nothing publishes now: the kill's leftovers

        answered_ids = {a.transaction_id for a in before}
        replay_idx = [i for i, txid in enumerate(ids) if txid in answered_ids]
        replay = rig.load()
        replay.run(replay_idx)
        replays = {a.transaction_id: a.body for a in replay.answers}
        acks = tally_acks(before, survived.keys(), killed_at, replays)

        rest_idx = [i for i, txid in enumerate(ids) if txid not in answered_ids]
        rest = rig.load()
        rest.run(rest_idx)
        server.proc.send_signal(signal.SIGINT)  # Ctrl-C: uvicorn stops, the publisher flushes
        code = server.proc.wait(60)
        if code != 0:
            notes.append(f"the restarted endpoint exited with {code}")
        final = activity_ids(private, topic)

        after = [*replay.answers, *rest.answers]
        missing_after = len({a.transaction_id for a in after} - final.keys())
        duplicates = sum(n - 1 for n in final.values())
        lost_ids = answered_ids - survived.keys()
        changed = sum(
            1
            for a in before
            if a.transaction_id in lost_ids and replays.get(a.transaction_id) != a.body
        )
        notes.append(
            f"killed after {len(before)} answers ({sent_before} requests sent); "
            f"{acks.lost} acknowledged decisions missing from {topic} after the kill, answered "
            f"at most {acks.lost_max_age_s * 1000:.0f} ms before it (window "
            f"{LOSS_WINDOW_S * 1000 if durability == 'none' else 0:.0f} ms)"
        )
        notes.append(
            f"replayed {acks.replayed} decisions in the topic: {acks.replay_mismatches} "
            f"answered differently; the {len(lost_ids)} lost ones were decided again "
            f"({changed} answered differently from the first time)"
        )
        if missing_after:
            notes.append(f"{missing_after} decisions answered after the restart are not in {topic}")
        failed_after = len(replay.unanswered) + len(rest.unanswered)
        if failed_after:
            notes.append(f"{failed_after} requests after the restart got no answer")
        statuses = load.statuses + replay.statuses + rest.statuses
        if set(statuses) - {200}:
            notes.append(f"responses other than 200: {dict(statuses)}")
        # `none` may lose the last window's decisions; `ack` and `log` none at all.
        loss_ok = acks.lost_max_age_s <= LOSS_WINDOW_S if durability == "none" else acks.lost == 0
        ok = (
            loss_ok
            and acks.replay_mismatches == 0
            and acks.replayed > 0
            and missing_after == 0
            and duplicates == 0
            and set(statuses) == {200}
            and failed_after == 0
            and code == 0
        )
        return ChaosReport(
            scenario=config.name,
            fault="endpoint",
            sent=events,
            lost=acks.lost + missing_after,
            unexpected_duplicates=duplicates,
            duplicate_alert_ids=0,  # the endpoint raises no alerts: it answers verdicts
            recovery_s=recovery_s,
            ok=ok,
            notes=notes,
        )
