"""The simulation engine: one SimPy environment, cohort processes, device clocks, delivery, sinks.

At each tick T (SimPy time, seconds since `start`):
1. every cohort process generates its entities' readings with true time in [T, T + tick);
2. the emitter (which runs after them) stamps the readings with device clocks, routes them
   through the delivery model into the emit queue, flushes outage backlogs that ended before T,
   and sends every delivery with emit time < T, in emit order, paced to wall time.
Sends are released only once SimPy time has passed their emit time, and nothing can be emitted
earlier than its true time, so the stream is in exact emit-time order and depends only on the
config and seed, never on speed, sink or machine.

The engine runs a scenario already built (`scenarios.catalog.build_scenario` builds one from a
scenario file), with the run settings it reads (`simulators.settings.RunSettings`). A scenario
may also bring (hooks with defaults, see `simulators.scenario.Scenario`): devices other than its
entities (clocks and delivery then apply per device, and truth gains `device_id`), extra truth
keys, its own event encoder, and a sink wrapper (e.g. events over HTTP, truth to the sink).

A run with a duration generates readings for that long, then delivers what is still pending:
outages still going at the end end then (their backlogs flush), so a run ends within about
max_delay_s of its duration. A run with an event count stops right after that many sends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from core.contracts import topics
from core.errors import StreamsimError
from simulators.clock import DeviceClocks
from simulators.delivery import DeliveryModel
from simulators.emit_queue import EmitQueue
from simulators.entities import EntityTable
from simulators.pacing import ControlFn, Pacer
from simulators.records import Readings, group_ranks, row_dtype, to_rows
from simulators.scenario import Scenario, Source
from simulators.seeds import id_salt, rng_for
from simulators.settings import RunSettings
from simulators.sinks.base import Records, Sink, Topics
from simulators.truth import TruthEncoder, TruthField

# In --events mode, give up if this many readings per wanted event brought no events.
_STARVED_READINGS_PER_EVENT = 100


@dataclass
class RunSummary:
    """What a run did. `to_json()` gives the `simulate --json` contract keys (and a few more)."""

    events: int = 0  # event records sent, retries included
    truth: int = 0  # truth records written
    duplicates: int = 0  # retries sent
    dropped: int = 0  # readings lost (network or buffer overflow)
    outages: int = 0  # outages that buffered at least one reading
    readings: int = 0  # readings generated
    sim_s: float = 0.0
    wall_s: float = 0.0
    failed: int = 0  # records the sink could not deliver
    errors: list[str] = field(default_factory=list)
    backpressure_waits: int = 0
    id_prefix: str = ""  # every event id of the run starts with it
    anchor: dict[str, Any] = field(default_factory=dict)  # Pacer.anchor()
    retunes: list[dict[str, Any]] = field(default_factory=list)  # Pacer.retunes: live changes
    details: dict[str, Any] = field(default_factory=dict)  # the sink's own figures

    @property
    def events_per_s(self) -> float:
        return self.events / self.wall_s if self.wall_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "truth": self.truth,
            "duplicates": self.duplicates,
            "dropped": self.dropped,
            "outages": self.outages,
            "events_per_s": round(self.events_per_s, 1),
            "records_per_s": round((self.events + self.truth) / self.wall_s, 1)
            if self.wall_s
            else 0.0,
            "readings": self.readings,
            "sim_s": round(self.sim_s, 3),
            "wall_s": round(self.wall_s, 3),
            "failed": self.failed,
            "backpressure_waits": self.backpressure_waits,
            "id_prefix": self.id_prefix,
            "anchor": self.anchor,
            "retunes": self.retunes,
            **self.details,
        }


@dataclass(frozen=True)
class Progress:
    sim_s: float
    events: int
    backlog: int  # waiting to be emitted, held in outages, or unconfirmed by the sink
    target_events: int | None
    target_sim_s: float


ProgressFn = Callable[[Progress], None]


#: Event ids number readings within 2**40 (10 hex digits), in a keyed shuffled order.
ID_SPACE = 1 << 40
_ID_MULTIPLIER = 0x9E3779B97F4A7C15 & (ID_SPACE - 1) | 1  # odd: a bijection mod 2**40


def id_numbers(first: int, n: int, key: int) -> np.ndarray:
    """The id numbers of readings `first .. first + n - 1` (generation order): distinct, fixed
    by the seed (`key`), and not in true-time order, so no detector can order events by id.

    >>> a = id_numbers(0, 5, 12345)
    >>> len(set(a.tolist())), bool((np.diff(a) > 0).all())
    (5, False)
    """
    gen = np.arange(first, first + n, dtype=np.uint64)
    mixed = (gen * np.uint64(_ID_MULTIPLIER)) & np.uint64(ID_SPACE - 1)
    mixed ^= np.uint64(key) ^ (mixed >> np.uint64(17))
    return mixed.astype(np.int64)


class Engine:
    def __init__(
        self,
        scenario: Scenario,
        config: RunSettings,
        sink: Sink,
        *,
        speed: float | str | None = None,
        control: ControlFn | None = None,
    ) -> None:
        """`scenario`: built from `config` (the same seed and classes). `control`: polled for
        live changes of speed and max_rate (`simulators.pacing.PacingControl`)."""
        self.config = config
        self.scenario = scenario
        self.sink = scenario.wrap_sink(sink)
        self.start_ms = config.start_ms
        self.table = EntityTable.build(scenario.entity_ids, config.classes, config.class_counts())
        devices = scenario.devices
        self.devices = self.table if devices is None else devices
        self.dtype = row_dtype([(f.name, f.dtype) for f in scenario.payload])
        prefix = f"{scenario.id_prefix}-{id_salt(config.seed, config.run_id)}-"
        self.clocks = DeviceClocks(self.devices, rng_for(config.seed, "clocks"), self.start_ms)
        self.delivery = DeliveryModel(
            self.devices, rng_for(config.seed, "delivery"), self.start_ms, self.dtype
        )
        self.queue = EmitQueue(self.dtype, self.start_ms, round(config.tick_s * 1000))
        self.events = scenario.encoder(prefix, self.table)
        extras: list[TruthField] = list(scenario.truth_fields)
        if devices is not None:
            extras.insert(0, TruthField("device_id", "dev", devices.json_ids))
        self.truth = TruthEncoder(config.name, prefix, self.table, scenario.labels, extras)
        self.pacer = Pacer.from_settings(config.pacing, self.start_ms, speed, control)
        self.topics = Topics(self.scenario.topic, topics.truth(config.name).name)
        self.summary = RunSummary(id_prefix=prefix)
        self._id_key = int(rng_for(config.seed, "event_ids").integers(0, ID_SPACE))
        self._sources = self.scenario.sources(self.table)
        self._seq = np.zeros(len(self.table), dtype=np.int64)
        self._intake: list[Readings] = []
        self._generating = 0

    # -- running ---------------------------------------------------------------------------

    def run(
        self,
        *,
        events: int | None = None,
        duration_s: float | None = None,
        progress: ProgressFn | None = None,
    ) -> RunSummary:
        """Generate for `duration_s` simulated seconds (default: the config's) and deliver
        everything, or stop once `events` event records were sent, whichever comes first."""
        if events is not None and events < 1:
            raise StreamsimError(f"--events must be >= 1, got {events}")
        if duration_s is not None and duration_s <= 0:
            raise StreamsimError(f"--duration must be > 0 seconds, got {duration_s}")
        if duration_s is None:
            duration_s = float("inf") if events is not None else self.config.duration_s
        env = simpy.Environment()
        done = env.event()
        for source in self._sources:
            env.process(self._cohort(env, source, duration_s))
        env.process(self._emitter(env, events, duration_s, done, progress))
        self.sink.open(self.topics)
        started = time.perf_counter()
        self.pacer.restart()
        self.summary.anchor = self.pacer.anchor()
        try:
            env.run(until=done)
        finally:
            report = self.sink.close()
            self.summary.wall_s = time.perf_counter() - started
            self.summary.retunes = self.pacer.retunes
        self.summary.sim_s = float(env.now)
        self.summary.outages = self.delivery.outages_seen
        self.summary.failed = report.failed
        self.summary.errors = report.errors
        self.summary.backpressure_waits = report.backpressure_waits
        self.summary.details = report.details
        return self.summary

    def _ms(self, t_s: float) -> int:
        return self.start_ms + round(t_s * 1000)

    def _cohort(
        self, env: simpy.Environment, source: Source, end_s: float
    ) -> Generator[simpy.Event, Any, None]:
        self._generating += 1
        tick = self.config.tick_s
        while env.now < end_s:
            t1 = min(env.now + tick, end_s)
            batch = source.readings(self._ms(env.now), self._ms(t1))
            if batch is not None and len(batch):
                self._intake.append(batch)
            yield env.timeout(tick)
        self._generating -= 1

    def _emitter(
        self,
        env: simpy.Environment,
        limit: int | None,
        end_s: float,
        done: simpy.Event,
        progress: ProgressFn | None,
    ) -> Generator[simpy.Event, Any, None]:
        ended = False
        while True:
            yield env.timeout(0)  # scheduled after this instant's cohort steps: they go first
            now_ms = self._ms(env.now)
            self._ingest()
            if self._generating == 0 and not ended:
                self.delivery.reconnect_all(self._ms(end_s))
                ended = True
            flushed = self.delivery.release(now_ms)
            self.queue.push(flushed.sends)
            self._write_drops(flushed.drops)
            if self._send(self.queue.pop_before(now_ms), limit):
                break
            if progress is not None:
                progress(self._progress(env.now, limit, end_s))
            idle = not (self._intake or len(self.queue) or self.delivery.backlog)
            if self._generating == 0 and idle:
                break
            self._check_not_starved(limit)
            yield env.timeout(self.config.tick_s)
        if progress is not None:
            progress(self._progress(env.now, limit, end_s))
        done.succeed()

    # -- one tick's work -------------------------------------------------------------------

    def _ingest(self) -> None:
        """Turn the readings generated this tick into routed rows."""
        if not self._intake:
            return
        rows = to_rows(self._intake, self.dtype)
        self._intake = []
        n = rows.shape[0]
        rows["gen"] = id_numbers(self.summary.readings, n, self._id_key)
        self.summary.readings += n
        ent = rows["ent"]
        rows["seq"] = self._seq[ent] + group_ranks(ent)
        np.add.at(self._seq, ent, 1)
        rows["event_ms"] = self.clocks.stamp(rows["dev"], rows["true_ms"])
        routed = self.delivery.route(rows)
        self.queue.push(routed.sends)
        self._write_drops(routed.drops)

    def _write_drops(self, rows: np.ndarray) -> None:
        if rows.shape[0] == 0:
            return
        truth = Records(self.truth.keys(rows), self.truth.dropped(rows), rows["true_ms"].tolist())
        self.sink.write(Records(), truth)
        self.summary.truth += rows.shape[0]
        self.summary.dropped += rows.shape[0]

    def _send(self, rows: np.ndarray, limit: int | None) -> bool:
        """Send rows in emit order, paced; True once `limit` events were sent."""
        if limit is not None:
            rows = rows[: limit - self.summary.events]
        for part in self.pacer.chunks(rows["emit_ms"]):
            chunk = rows[part]
            stamps = chunk["emit_ms"].tolist()
            events = Records(
                self.table.keys[chunk["ent"]].tolist(), self.events.encode(chunk), stamps
            )
            truth = Records(self.truth.keys(chunk), self.truth.sent(chunk), stamps)
            self.sink.write(events, truth)
            self.summary.events += len(events)
            self.summary.truth += len(truth)
            self.summary.duplicates += int(chunk["dup"].sum())
        return limit is not None and self.summary.events >= limit

    def _progress(self, now_s: float, limit: int | None, end_s: float) -> Progress:
        backlog = len(self.queue) + self.delivery.backlog + self.sink.pending()
        return Progress(now_s, self.summary.events, backlog, limit, end_s)

    def _check_not_starved(self, limit: int | None) -> None:
        if limit is None:
            return
        wanted = limit - self.summary.events
        if self.summary.readings > _STARVED_READINGS_PER_EVENT * limit + 1_000_000 and wanted > 0:
            raise StreamsimError(
                f"{self.summary.readings} readings generated but only {self.summary.events} "
                f"of {limit} events sent: the delivery settings lose or hold nearly everything; "
                "run with --duration instead"
            )
