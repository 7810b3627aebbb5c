"""`streamsim api`: the fraud endpoint and read API under uvicorn, on the stack's api.host/port."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from streamsim.cli.common import ConfigOpt, JsonOpt, console, emit, stack_from

SettingsOpt = Annotated[
    Path | None,
    typer.Option(
        "--settings",
        help="API settings YAML (thresholds, scoring, state bounds). Default: "
        "$STREAMSIM_API_SETTINGS, then built-in defaults.",
        dir_okay=False,
    ),
]


def api(
    config: ConfigOpt = None,
    settings: SettingsOpt = None,
    access_log: Annotated[
        bool, typer.Option("--access-log/--no-access-log", help="uvicorn access lines.")
    ] = True,
    service_name: Annotated[
        str,
        typer.Option(
            "--service",
            help="What this process serves: all (the fraud endpoint and the panel's API), "
            "fraud (the endpoint alone) or panel (the panel's API alone).",
        ),
    ] = "all",
    instances: Annotated[
        int,
        typer.Option(
            min=1,
            help="Endpoint processes sharing the port (SO_REUSEPORT); more than 1 needs "
            "--service fraud. Each rebuilds and follows cards.activity, and listens alone on "
            "api.port + 1 + i too (for card affinity: domain.endpoint.urls).",
        ),
    ] = 1,
    instance: Annotated[int | None, typer.Option(hidden=True)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Start the HTTP service (POST /v1/transactions, read API, /docs) until Ctrl-C.

    Secrets come from the environment: STREAMSIM_PAN_SECRET (card token key; default: a key
    kept in <dirs.data>/api/pan-secret) and STREAMSIM_API_TOKEN (control routes).
    """
    from api.server import serve

    if service_name not in ("all", "fraud", "panel"):
        raise typer.BadParameter(f"{service_name!r}: all, fraud or panel", param_hint="--service")
    if instances > 1 and service_name != "fraud":
        raise typer.BadParameter("several instances serve the endpoint only: --service fraud")
    stack = stack_from(config)
    url = f"http://{stack.api.host}:{stack.api.port}"
    if instances > 1:
        _instances(instances, stack.api.host, stack.api.port, url, as_json)
        return
    if not as_json and instance is None:
        console.print(
            f"{'fraud endpoint' if service_name != 'panel' else 'panel API'} on {url} "
            f"(docs: {url}/docs); Ctrl-C stops",
            highlight=False,
        )
    service = serve(
        stack,
        settings,
        access_log=access_log,
        services=service_name,  # type: ignore[arg-type]
        instance=instance,
    )
    s = service.stats
    publish = service.publisher.counters()
    emit(
        {
            "url": url,
            "requests": s.requests,
            "decisions": dict(s.decisions),
            "replays": s.replays,
            "rejected": s.rejected,
            "published": publish["delivered"],
            "publish_failed": publish["failed"],
        },
        as_json,
        f"stopped: {s.requests} requests, {dict(s.decisions)}, {publish['delivered']} published, "
        f"{publish['failed']} publish failures",
    )


def _instances(n: int, host: str, port: int, url: str, as_json: bool) -> None:
    """Run `n` copies of this command, each `--instance i` on the shared port, until Ctrl-C or
    SIGTERM (passed on to each as SIGINT); exits non-zero if one failed."""
    import signal
    import subprocess
    import sys

    from api.server import instance_port
    from core.errors import StreamsimError
    from core.ports import port_in_use

    for taken in [port, *(instance_port(port, i) for i in range(n))]:
        if port_in_use(host, taken):
            raise StreamsimError(
                f"port {taken} on {host} is taken (--instances {n} uses {port} and "
                f"{instance_port(port, 0)}-{instance_port(port, n - 1)})"
            )
    args = [a for a in sys.argv[1:] if not a.startswith("--instances")]
    if "--instances" in sys.argv:  # `--instances N` as two words
        i = sys.argv.index("--instances")
        args = [a for j, a in enumerate(sys.argv[1:], 1) if j not in (i, i + 1)]
    children = [
        subprocess.Popen(  # own sessions: a terminal's Ctrl-C reaches them once, from here
            [sys.executable, "-m", "streamsim", *args, "--instance", str(i)],
            start_new_session=True,
        )
        for i in range(n)
    ]
    if not as_json:
        console.print(
            f"{n} fraud endpoint instances on {url} (each alone on port "
            f"{instance_port(port, 0)}-{instance_port(port, n - 1)}); Ctrl-C stops",
            highlight=False,
        )

    def forward(_signum: int, _frame: object) -> None:
        for child in children:  # SIGINT: each stops as on Ctrl-C (flushes, exits 0)
            if child.poll() is None:
                child.send_signal(signal.SIGINT)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    codes = [child.wait() for child in children]
    emit({"url": url, "instances": n, "exit_codes": codes}, as_json, f"stopped: exit codes {codes}")
    if any(codes):
        raise typer.Exit(1)
