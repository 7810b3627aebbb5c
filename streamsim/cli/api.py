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
    as_json: JsonOpt = False,
) -> None:
    """Start the HTTP service (POST /v1/transactions, read API, /docs) until Ctrl-C.

    Secrets come from the environment: STREAMSIM_PAN_SECRET (card token key; default: a key
    kept in <dirs.data>/api/pan-secret) and STREAMSIM_API_TOKEN (control routes).
    """
    from api.server import serve

    stack = stack_from(config)
    url = f"http://{stack.api.host}:{stack.api.port}"
    if not as_json:
        console.print(f"fraud endpoint on {url} (docs: {url}/docs); Ctrl-C stops", highlight=False)
    service = serve(stack, settings, access_log=access_log)
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
