"""What every command shares: the --config and --json options, output, and exit codes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console

from core.config import StackConfig, load_stack
from core.names import canonical

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="Stack settings YAML (Kafka, Spark, ports, dirs). Default: $STREAMSIM_CONFIG, "
        "then config/stack.yaml, then built-in defaults.",
        dir_okay=False,
    ),
]


def domain_name(value: str | None) -> str | None:
    """A scenario or job name on the command line; a retired one (`core.names`) still works."""
    return None if value is None else canonical(value)


JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON object on the last line of stdout.")
]


def stack_from(config: Path | None) -> StackConfig:
    return load_stack(config)


def emit(payload: dict[str, Any], as_json: bool, human: str | None = None) -> None:
    """Print the human summary, or the payload as a single JSON line."""
    if as_json:
        print(orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY, default=str).decode())
    elif human is not None:
        console.print(human)


def fail(message: str, code: int = 1) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)
