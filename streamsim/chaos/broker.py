"""Broker faults: kill -9 a broker mid-simulation, restart it, and account for every record.

Each run gets a private broker (`broker`) or 3-node cluster (`broker-of-3`) on free ports in a
fresh directory under `dirs.data`, so a user's own broker is never touched. The simulator
produces with its usual settings (idempotent, acks=all, a delivery timeout of minutes, far
longer than the outage); at a third of the run one broker gets SIGKILL, and after `outage_s`
it is started again. A probe measures `recovery_s`: from the kill until an acks=all write is
acknowledged again. Afterwards the event topics are counted against truth (`ledger`).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, Message, Producer

from core.config import StackConfig
from core.errors import StreamsimError
from core.kafka.admin import ensure_topics
from core.kafka.clients import producer_config
from streamsim.chaos.ledger import count_against_truth
from streamsim.chaos.report import ChaosReport
from streamsim.kafka.broker import LocalBroker, free_node_ports

if TYPE_CHECKING:
    from scenarios.catalog import ScenarioConfig
    from simulators import Progress

#: fault name -> nodes in the private cluster (node 1 is the one killed).
BROKER_FAULTS = {"broker": 1, "broker-of-3": 3}
PROBE_TOPIC = "chaos.probe"


# One request in flight: when a request dies with the broker, librdkafka answers the
# out-of-order errors of the ones behind it by bumping its epoch and resending records
# that were already written (librdkafka#4953).
ONE_REQUEST_IN_FLIGHT: dict[str, Any] = {"max.in.flight.requests.per.connection": 1}


def private_stack(stack: StackConfig, nodes: int, home: Path) -> StackConfig:
    """The stack with a local broker (or cluster) of its own: free ports, data in `home`."""
    if stack.kafka.external:
        raise StreamsimError(
            "chaos kills brokers, so it runs its own local ones: unset kafka.bootstrap "
            "(and STREAMSIM_KAFKA_BOOTSTRAP) for `streamsim chaos --fault broker*`"
        )
    data = stack.model_dump(mode="json")
    port, controller = free_node_ports(stack.kafka.local.host, nodes)
    local = data["kafka"]["local"]
    # A JVM restarting on a loaded machine can take a minute: wait, don't call it a failure.
    ready = max(local["ready_timeout_s"], 180.0)
    local.update(port=port, controller_port=controller, brokers=nodes, ready_timeout_s=ready)
    data["dirs"].update(
        data=str(home), checkpoints=str(home / "checkpoints"), lake=str(home / "lake")
    )
    return StackConfig.model_validate(data)


@dataclass
class _Fault:
    """Kills node `node_id` once the run has sent `at_events`, restarts it after `outage_s`,
    and probes until an acks=all write succeeds again."""

    cluster: LocalBroker
    stack: StackConfig
    at_events: int
    outage_s: float
    node_id: int = 1
    killed_at: float | None = None
    recovered_at: float | None = None
    restarted: bool = False
    errors: list[str] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)

    def on_progress(self, progress: Progress) -> None:
        if self.killed_at is None and progress.events >= self.at_events:
            self.cluster.kill_node(self.node_id)
            self.killed_at = time.monotonic()
            for target in (self._restart, self._probe):
                thread = threading.Thread(target=target, daemon=True)
                thread.start()
                self._threads.append(thread)

    def _restart(self) -> None:
        time.sleep(self.outage_s)
        try:
            self.cluster.start_node(self.node_id)
            self.restarted = True
        except StreamsimError as exc:
            self.errors.append(f"restart of broker node {self.node_id} failed: {exc}")

    def _probe(self) -> None:
        acked: list[bool] = []

        def delivered(err: KafkaError | None, msg: Message) -> None:
            acked.append(err is None)

        producer = Producer(
            producer_config(
                self.stack, **{"linger.ms": 0, "message.timeout.ms": 2000, "log_level": 0}
            )
        )
        deadline = time.monotonic() + self.outage_s + self.stack.kafka.local.ready_timeout_s * 2
        while time.monotonic() < deadline:
            acked.clear()
            producer.produce(PROBE_TOPIC, b'{"probe":true}', on_delivery=delivered)
            producer.flush(5.0)
            if acked and acked[0]:
                self.recovered_at = time.monotonic()
                return
            time.sleep(0.1)
        self.errors.append("no acks=all write succeeded after the kill")

    def join(self, timeout_s: float) -> None:
        for thread in self._threads:
            thread.join(timeout_s)


def run_broker_fault(
    config: ScenarioConfig,
    fault: str,
    stack: StackConfig,
    *,
    events: int = 20_000,
    speed: float | str | None = 1.0,
    outage_s: float = 5.0,
    seed: int | None = None,
    keep: bool = False,
) -> ChaosReport:
    """Run `config` into a private broker (or cluster), kill -9 node 1 a third of the way in,
    restart it after `outage_s`, and count every event against truth."""
    from scenarios.catalog import run_scenario
    from simulators.sinks.kafka import KafkaSink

    nodes = BROKER_FAULTS[fault]
    stack.dirs.data.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix=f"chaos-{fault}-", dir=stack.dirs.data)).resolve()
    private = private_stack(stack, nodes, home)
    cluster = LocalBroker(private)
    try:
        cluster.up()
        ensure_topics(private, [PROBE_TOPIC])
        chaos = _Fault(cluster, private, at_events=max(1, events // 3), outage_s=outage_s)
        summary = run_scenario(
            config,
            # librdkafka's own connection-refused lines would bury the report; the sink still
            # warns once that Kafka is unreachable and counts the errors (`kafka_outage`).
            # Its final flush outlasts any restart, so a slow one is never counted as a loss.
            KafkaSink(
                private,
                flush_timeout_s=outage_s + 2 * private.kafka.local.ready_timeout_s + 120,
                tag_sends=True,
                log_level=0,
                **ONE_REQUEST_IN_FLIGHT,
            ),
            events=events,
            speed=speed,
            seed=seed,
            progress=chaos.on_progress,
            stack=private,
        )
        chaos.join(timeout_s=outage_s + private.kafka.local.ready_timeout_s * 2 + 30)
        if not chaos.restarted and chaos.killed_at is not None:
            cluster.start_node(chaos.node_id)  # the restart failed or is late: count anyway
        ledger = count_against_truth(private, config.name, summary.id_prefix)
        notes = list(chaos.errors) + list(summary.errors)
        not_injected = None
        if chaos.killed_at is None:
            not_injected = (
                f"the run ended after {summary.events:,} events, before the {chaos.at_events:,} "
                "at which the broker is killed: nothing was killed"
            )
            notes.append(not_injected)
        if ledger.truth_records != summary.truth:
            notes.append(f"truth topic holds {ledger.truth_records} of {summary.truth} records")
        if ledger.truth_resent or ledger.events_resent:
            notes.append(
                f"the producer resent {ledger.events_resent} events and {ledger.truth_resent} "
                "truth records after the kill (idempotent, not transactional); each send is "
                "counted once"
            )
        outage: dict[str, Any] = summary.details.get("kafka_outage", {})
        if outage:
            notes.append(
                f"the simulator waited through the outage: {outage['errors']} connection "
                f"errors over {outage['seconds']}s"
            )
        recovery = (
            chaos.recovered_at - chaos.killed_at
            if chaos.recovered_at is not None and chaos.killed_at is not None
            else float("nan")
        )
        ok = (
            chaos.killed_at is not None
            and chaos.recovered_at is not None
            and not chaos.errors
            and summary.failed == 0
            and ledger.lost == 0
            and ledger.unexpected_duplicates == 0
            and ledger.truth_records == summary.truth
        )
        return ChaosReport(
            scenario=config.name,
            fault=fault,
            sent=summary.events,
            lost=ledger.lost,
            unexpected_duplicates=ledger.unexpected_duplicates,
            duplicate_alert_ids=0,  # no job runs in a broker fault: there are no alerts
            recovery_s=recovery,
            ok=ok,
            notes=notes,
            not_injected=not_injected,
        )
    finally:
        cluster.down()
        if not keep:
            shutil.rmtree(home, ignore_errors=True)
