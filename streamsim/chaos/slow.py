"""Slow-broker fault: throttle a private broker with Kafka client quotas while the simulator
and the fraud endpoint write to it, lift them, and account for every record.

On a private broker (`broker.private_stack`) and a free port, `streamsim api` runs in POS mode
(decisions to `cards.activity`). Kafka's own admin tool (`kafka.admin.ConfigCommand`, from the
broker's jars) sets `producer_byte_rate` and `consumer_byte_rate` on the default client entity,
so every client of the broker is throttled. Then the simulator produces the card scenario (at
`SPEED`) and `--events` seeded card transactions are posted to the endpoint; after `outage_s` the
quotas are deleted. Both clients log when the broker throttles them (librdkafka's
`throttle_cb`, `core.kafka.throttle`). Afterwards the scenario's events are counted against
truth (`ledger`, as for the broker faults) and every decision answered 200 must be in
`cards.activity` once. `recovery_s` runs from lifting the quotas until the simulator's last
record was acknowledged.
"""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from typing import TYPE_CHECKING

from core.config import StackConfig
from core.errors import StreamsimError
from core.jvm import java_executable, kafka_classpath
from streamsim.chaos.driver import Producing, require_card_scenario
from streamsim.chaos.endpoint import EndpointRig, activity_ids
from streamsim.chaos.ledger import count_against_truth
from streamsim.chaos.report import ChaosReport

if TYPE_CHECKING:
    from scenarios.catalog import ScenarioConfig

FAULT = "slow-broker"
#: Bytes per second each client may produce and fetch while the broker is throttled: well
#: below what the lz4-compressed records of either client take (3,000 card events and their
#: truth compress to a few kB per second of the quota window).
QUOTA_BYTES_PER_S = 512
QUOTAS = ("producer_byte_rate", "consumer_byte_rate")
#: The endpoint's line when the broker throttles its publisher (`core.kafka.throttle`).
ENDPOINT_THROTTLED = re.compile(r"^.*Kafka throttles the publisher to .*$", re.MULTILINE)
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
#: The simulator's pace: slow enough that it still sends when the quotas go on (kafka-configs
#: is a JVM: seconds), e.g. 3,000 card events of 2,000 cards take about 25 s.
SPEED = 300.0


def set_default_client_quota(stack: StackConfig, rate: int | None) -> None:
    """Set (`rate` bytes/s) or delete (None) the default client entity's produce and fetch
    quotas, with Kafka's own `kafka-configs` (ConfigCommand) run from the broker's jars."""
    java = java_executable()
    if java is None:
        raise StreamsimError("no Java to run Kafka's ConfigCommand")
    change = (
        ["--delete-config", ",".join(QUOTAS)]
        if rate is None
        else ["--add-config", ",".join(f"{q}={rate}" for q in QUOTAS)]
    )
    command = [
        java, "-Xmx256m", "-cp", kafka_classpath(stack), CONFIG_COMMAND,
        "--bootstrap-server", stack.kafka.bootstrap_servers,
        "--alter", "--entity-type", "clients", "--entity-default", *change,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise StreamsimError(
            f"kafka-configs {' '.join(change)} failed:\n{done.stdout}{done.stderr}"[-3000:]
        )


def run_slow_broker_fault(
    config: ScenarioConfig,
    stack: StackConfig,
    *,
    events: int = 3_000,
    speed: float | str | None = SPEED,
    outage_s: float = 5.0,
    seed: int | None = None,
    keep: bool = False,
) -> ChaosReport:
    """Throttle a private broker for `outage_s` while `config` runs into it (at `speed`) and
    `events` card transactions go to a private endpoint; count both against what was sent.

    Not injected (`ChaosReport.not_injected`) when the simulator had sent and flushed every
    event before the quotas went on."""
    require_card_scenario(config, FAULT)
    run_seed = config.seed if seed is None else seed
    notes: list[str] = []
    # `none`: the endpoint answers while its records wait out the quota (under `ack` each
    # answer would wait up to a throttle, ~10 s, and a few would be 503s).
    with EndpointRig(stack, FAULT, events, run_seed, keep, durability="none") as rig:
        private, activity, server = rig.private, rig.topic, rig.start()

        # The quotas go on once the simulator's own producer sends events (a card scenario
        # first publishes its cardholder profiles with another producer).
        sending = threading.Event()
        producing = Producing(
            config,
            private,
            events,
            speed,
            seed,
            progress=lambda p: sending.set() if p.events > 0 else None,
        )
        producing.thread.start()
        while not sending.wait(0.2):
            if not producing.thread.is_alive():
                raise StreamsimError(f"the simulator ended before it sent: {producing.error}")
        set_default_client_quota(private, QUOTA_BYTES_PER_S)
        throttled_at = time.monotonic()
        not_injected = (
            None
            if producing.thread.is_alive()
            else "the simulator had sent everything before the quotas went on (give it "
            "longer: more --events or a lower --speed)"
        )
        if not_injected:
            notes.append(not_injected)
        load = rig.load()
        posting = load.run(list(range(events)), background=True)
        time.sleep(max(0.0, throttled_at + outage_s - time.monotonic()))
        set_default_client_quota(private, None)
        lifted_at = time.monotonic()
        notes.append(
            f"clients throttled to {QUOTA_BYTES_PER_S} bytes/s for {lifted_at - throttled_at:.1f}s"
        )
        producing.thread.join()
        recovery_s = time.monotonic() - lifted_at
        for thread in posting:
            thread.join()
        if producing.error is not None:
            raise StreamsimError(f"the simulator failed: {producing.error}") from producing.error
        server.proc.send_signal(signal.SIGINT)  # Ctrl-C: uvicorn stops, the publisher flushes
        code = server.proc.wait(180)  # its flush may wait out a throttle

        summary = producing.summary
        ledger = count_against_truth(private, config.name, summary.id_prefix)
        final = activity_ids(private, activity)
        answered = {a.transaction_id for a in load.answers}
        missing = len(answered - final.keys())
        duplicates = sum(n - 1 for n in final.values())
        sim_throttle = summary.details.get("kafka_throttle")
        said = ENDPOINT_THROTTLED.search(server.log.read_text(errors="replace"))
        notes.append(
            "the simulator was throttled: "
            + (
                f"{sim_throttle['events']} throttled responses, {sim_throttle['total_ms']} ms"
                if sim_throttle
                else "never (it did not say so)"
            )
        )
        notes.append(
            f"the endpoint said: {said.group(0).strip()}"
            if said
            else "the endpoint never said it was throttled"
        )
        notes.append(
            f"{len(load.answers)} of {events} requests answered 200; {missing} of them are not "
            f"in {activity}; the simulator's events: {ledger.lost} lost"
        )
        statuses = dict(load.statuses)
        if set(statuses) - {200} or load.unanswered:
            notes.append(f"responses: {statuses}, {len(load.unanswered)} unanswered")
        if code != 0:
            notes.append(f"the endpoint exited with {code}")
        notes.extend(summary.errors)
        ok = (
            sim_throttle is not None
            and said is not None
            and summary.failed == 0
            and ledger.lost == 0
            and ledger.unexpected_duplicates == 0
            and ledger.truth_records == summary.truth
            and len(load.answers) == events
            and missing == 0
            and duplicates == 0
            and code == 0
        )
        return ChaosReport(
            scenario=config.name,
            fault=FAULT,
            sent=summary.events,
            lost=ledger.lost + missing,
            unexpected_duplicates=ledger.unexpected_duplicates + duplicates,
            duplicate_alert_ids=0,  # no job runs: there are no alerts
            recovery_s=recovery_s,
            ok=ok,
            notes=notes,
            not_injected=not_injected,
        )
