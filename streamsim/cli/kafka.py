"""`streamsim kafka up | down | status`: the embedded local broker, or a local 3-node cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from streamsim.cli.common import ConfigOpt, JsonOpt, emit, stack_from
from streamsim.kafka.broker import LocalBroker

app = typer.Typer(
    help="The local KRaft broker (used when no external bootstrap is set): one node, or "
    "`--brokers 3` for a cluster with replication factor 3 and min.insync.replicas=2."
)

BrokersOpt = Annotated[
    int | None,
    typer.Option(
        "--brokers",
        help="1 or 3 nodes (3: combined broker+controllers, RF 3, min.insync.replicas=2). "
        "Default: kafka.local.brokers ($STREAMSIM_KAFKA_BROKERS), else 1.",
    ),
]


def _broker(config: Path | None, brokers: int | None) -> LocalBroker:
    if brokers is not None and brokers not in (1, 3):
        raise typer.BadParameter("1 or 3", param_hint="--brokers")
    return LocalBroker(stack_from(config), brokers)


@app.command()
def up(config: ConfigOpt = None, brokers: BrokersOpt = None, as_json: JsonOpt = False) -> None:
    """Start the broker(s) (formatting storage on first run) and wait until each answers."""
    status = _broker(config, brokers).up()
    nodes = f"{len(status.nodes)} brokers" if len(status.nodes) > 1 else "Kafka"
    emit(
        status.to_dict(),
        as_json,
        f"{nodes} up at [bold]{status.bootstrap}[/] (pid {status.pid}, log {status.log})",
    )


@app.command()
def down(config: ConfigOpt = None, brokers: BrokersOpt = None, as_json: JsonOpt = False) -> None:
    """Stop the broker(s) that `kafka up` started."""
    broker = _broker(config, brokers)
    stopped = broker.down()
    emit(
        {"stopped": stopped, **broker.status().to_dict()},
        as_json,
        "Kafka stopped." if stopped else "No local broker was running.",
    )


@app.command()
def status(config: ConfigOpt = None, brokers: BrokersOpt = None, as_json: JsonOpt = False) -> None:
    """Report whether the local broker(s) run, the bootstrap address, pids and log files."""
    s = _broker(config, brokers).status()
    if len(s.nodes) > 1:
        lines = [
            f"node {n.node} at {n.bootstrap}: "
            + (f"running (pid {n.pid})" if n.running else "not running")
            + f", log {n.log}"
            for n in s.nodes
        ]
        human = "\n".join([f"cluster {s.bootstrap}: {'up' if s.running else 'degraded'}", *lines])
    else:
        human = (
            f"running at {s.bootstrap} (pid {s.pid}), log {s.log}"
            if s.running
            else f"not running (would listen on {s.bootstrap}); start it with `streamsim kafka up`"
        )
    emit(s.to_dict(), as_json, human)
