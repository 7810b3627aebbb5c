"""The newest evaluation report (`streamsim evaluate` writes them to `<dirs.data>/evaluations/`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson


def latest_evaluation(directory: Path) -> dict[str, Any] | None:
    """`{"file", "modified_at" (epoch ms), "report"}` of the newest readable `*.json` in
    `directory` (by modification time, then name); None when there is none."""
    try:
        files = [p for p in directory.glob("*.json") if p.is_file()]
    except OSError:
        return None
    for path in sorted(files, key=lambda p: (p.stat().st_mtime_ns, p.name), reverse=True):
        try:
            report = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue  # being written, or not a report: try the next one
        if isinstance(report, dict):
            return {
                "file": path.name,
                "modified_at": path.stat().st_mtime_ns // 1_000_000,
                "report": report,
            }
    return None
