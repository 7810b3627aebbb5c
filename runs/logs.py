"""A child's log files as a supervisor reads them: the tail of a large log, the last JSON line
of a `--json` command's output."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

TAIL_CHARS = 4000


def tail(path: Path, chars: int = TAIL_CHARS) -> str:
    """The last `chars` bytes of a log, read from its end (a Spark job's log grows large)."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - chars))
            data = handle.read(chars)
    except OSError:
        return ""
    return data.decode("utf-8", "replace").strip()


def last_json_line(path: Path) -> dict[str, Any] | None:
    """The last line of `path` as a JSON object (a `--json` summary), or None."""
    try:
        lines = path.read_bytes().strip().splitlines()
    except OSError:
        return None
    if not lines:
        return None
    try:
        value = orjson.loads(lines[-1])
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
