"""`streamsim kafka up | down | status`: the embedded local broker."""

from __future__ import annotations

import typer

from streamsim.cli.common import ConfigOpt, JsonOpt, emit, stack_from
from streamsim.kafka.broker import LocalBroker

app = typer.Typer(
    help="The local single-node KRaft broker (used when no external bootstrap is set)."
)


@app.command()
def up(config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """Start the broker (formatting storage on first run) and wait until it answers."""
    status = LocalBroker(stack_from(config)).up()
    emit(
        status.to_dict(),
        as_json,
        f"Kafka is up at [bold]{status.bootstrap}[/] (pid {status.pid}, log {status.log})",
    )


@app.command()
def down(config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """Stop the broker that `kafka up` started."""
    broker = LocalBroker(stack_from(config))
    stopped = broker.down()
    emit(
        {"stopped": stopped, **broker.status().to_dict()},
        as_json,
        "Kafka stopped." if stopped else "No local broker was running.",
    )


@app.command()
def status(config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """Report whether the local broker runs, its bootstrap address, pid and log file."""
    s = LocalBroker(stack_from(config)).status()
    human = (
        f"running at {s.bootstrap} (pid {s.pid}), log {s.log}"
        if s.running
        else f"not running (would listen on {s.bootstrap}); start it with `streamsim kafka up`"
    )
    emit(s.to_dict(), as_json, human)
