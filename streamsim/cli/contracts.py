"""`streamsim contracts`: the contracts page for a system that is not ours, or the alert's
JSON Schema."""

from __future__ import annotations

from typing import Annotated

import typer


def contracts(
    schema: Annotated[
        bool,
        typer.Option("--schema", help="Print the alert's JSON Schema instead of the page."),
    ] = False,
) -> None:
    """Print what a foreign job reads and writes (Markdown: topics, keys, event schemas, the
    alert and the verdict), generated from core/contracts/."""
    from streamsim.contracts import page_markdown, schema_json

    print(schema_json(), end="") if schema else print(page_markdown())
