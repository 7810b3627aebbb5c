"""`streamsim config check FILE`: validate any config file and show it with defaults filled in."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml

from streamsim.cli.common import ConfigOpt, JsonOpt, emit
from streamsim.config.kinds import load_file

app = typer.Typer(help="Validate config files.")


@app.command()
def check(
    file: Annotated[Path, typer.Argument(help="A stack, scenario, pipeline or load-test YAML.")],
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Validate FILE and print the resolved values, defaults filled in."""
    kind, model = load_file(file)
    resolved = model.model_dump(mode="json")
    human = f"[green]ok[/]: {file} is a valid {kind} config\n" + yaml.safe_dump(
        resolved, sort_keys=False
    )
    emit({"ok": True, "file": str(file), "kind": kind, "resolved": resolved}, as_json, human)


@app.command()
def reference() -> None:
    """Print the configuration reference (every key, its default and meaning) as Markdown."""
    from streamsim.config.reference import reference_markdown

    print(reference_markdown())
