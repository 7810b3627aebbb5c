"""`streamsim kafka up | down | status [--cluster main|port]`: the embedded local broker, a local
3-node cluster, or the port's own cluster; `streamsim kafka mirror up | down | status`:
MirrorMaker 2 from the port cluster to the main one, with its replication lag."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from streamsim.cli.common import ConfigOpt, JsonOpt, emit, stack_from
from streamsim.kafka.broker import CLUSTERS, Cluster, LocalBroker
from streamsim.kafka.mirror import MirrorMaker, MirrorStatus

app = typer.Typer(
    help="The local KRaft broker (used when no external bootstrap is set): one node, or "
    "`--brokers 3` for a cluster with replication factor 3 and min.insync.replicas=2; "
    "`--cluster port` for a port's own cluster, which `kafka mirror` replicates to the main one."
)
mirror_app = typer.Typer(
    help="MirrorMaker 2: replicates the port cluster's shipping topics (kafka.mirror.topics) to "
    "the main cluster and reports the lag per topic-partition."
)
app.add_typer(mirror_app, name="mirror")

BrokersOpt = Annotated[
    int | None,
    typer.Option(
        "--brokers",
        help="1 or 3 nodes (3: combined broker+controllers, RF 3, min.insync.replicas=2). "
        "Default: kafka.local.brokers ($STREAMSIM_KAFKA_BROKERS), else 1.",
    ),
]


ClusterOpt = Annotated[
    str,
    typer.Option(
        "--cluster",
        help="main: the cluster every command uses (headquarters); port: a port's own cluster "
        "on kafka.port_cluster's ports, data in <dirs.data>/kafka/port/.",
    ),
]


def _broker(config: Path | None, brokers: int | None, cluster: str = "main") -> LocalBroker:
    if brokers is not None and brokers not in (1, 3):
        raise typer.BadParameter("1 or 3", param_hint="--brokers")
    if cluster not in CLUSTERS:
        raise typer.BadParameter(" or ".join(CLUSTERS), param_hint="--cluster")
    name: Cluster = "port" if cluster == "port" else "main"
    return LocalBroker(stack_from(config), brokers, name)


@app.command()
def up(
    config: ConfigOpt = None,
    brokers: BrokersOpt = None,
    cluster: ClusterOpt = "main",
    as_json: JsonOpt = False,
) -> None:
    """Start the broker(s) (formatting storage on first run) and wait until each answers."""
    status = _broker(config, brokers, cluster).up()
    nodes = f"{len(status.nodes)} brokers" if len(status.nodes) > 1 else "Kafka"
    emit(
        status.to_dict(),
        as_json,
        f"{nodes} up at [bold]{status.bootstrap}[/] (pid {status.pid}, log {status.log})",
    )


@app.command()
def down(
    config: ConfigOpt = None,
    brokers: BrokersOpt = None,
    cluster: ClusterOpt = "main",
    as_json: JsonOpt = False,
) -> None:
    """Stop the broker(s) that `kafka up` started."""
    broker = _broker(config, brokers, cluster)
    stopped = broker.down()
    emit(
        {"stopped": stopped, **broker.status().to_dict()},
        as_json,
        "Kafka stopped." if stopped else "No local broker was running.",
    )


@app.command()
def status(
    config: ConfigOpt = None,
    brokers: BrokersOpt = None,
    cluster: ClusterOpt = "main",
    as_json: JsonOpt = False,
) -> None:
    """Report whether the local broker(s) run, the bootstrap address, pids and log files."""
    s = _broker(config, brokers, cluster).status()
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
            else f"not running (would listen on {s.bootstrap}); start it with `streamsim kafka up"
            + ("`" if cluster == "main" else f" --cluster {cluster}`")
        )
    emit(s.to_dict(), as_json, human)


def _lag_lines(s: MirrorStatus) -> list[str]:
    if s.error:
        return [f"lag: unknown ({s.error})"]
    lines = [
        f"  {p.topic}[{p.partition}] -> {p.target_topic}: port {p.source_end}, "
        f"HQ {p.target_end}, lag {p.lag}"
        for p in s.partitions
    ]
    return [f"lag: {s.lag} records ({'caught up' if s.caught_up else 'copying'})", *lines]


@mirror_app.command("up")
def mirror_up(config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """Start MirrorMaker 2 (both clusters must run) and wait until it copies from the port."""
    s = MirrorMaker(stack_from(config)).up()
    head = f"MirrorMaker up (pid {s.pid}): {s.source} -> {s.target}, policy {s.policy}, log {s.log}"
    emit(s.to_dict(), as_json, "\n".join([head, *_lag_lines(s)]))


@mirror_app.command("down")
def mirror_down(config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """Stop the MirrorMaker that `kafka mirror up` started."""
    mirror = MirrorMaker(stack_from(config))
    stopped = mirror.down()
    emit(
        {"stopped": stopped, "running": False, "log": str(mirror.log_path.resolve())},
        as_json,
        "MirrorMaker stopped." if stopped else "No MirrorMaker was running.",
    )


@mirror_app.command("status")
def mirror_status(
    config: ConfigOpt = None,
    wait: Annotated[
        float,
        typer.Option("--wait", min=0, help="Poll up to this many seconds for a lag of 0."),
    ] = 0.0,
    as_json: JsonOpt = False,
) -> None:
    """Whether MirrorMaker runs, and the lag per topic-partition: the port's end offset minus
    HQ's end offset of its copy."""
    mirror = MirrorMaker(stack_from(config))
    s = mirror.wait_caught_up(wait) if wait > 0 else mirror.status()
    head = (
        f"MirrorMaker running (pid {s.pid}): {s.source} -> {s.target}, policy {s.policy}"
        if s.running
        else "MirrorMaker not running; start it with `streamsim kafka mirror up`"
    )
    emit(s.to_dict(), as_json, "\n".join([head, *_lag_lines(s)]))
