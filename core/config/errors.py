"""One error type for every bad config, worded for the person who wrote the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError


class ConfigError(Exception):
    """A config file (or environment override) that cannot be used.

    The message names the file, the key path, the bad value and what is allowed.
    """

    def __init__(self, source: str | Path, problems: list[str]) -> None:
        self.source = str(source)
        self.problems = problems
        detail = "; ".join(problems)
        super().__init__(f"{self.source}: {detail}")

    @classmethod
    def from_validation(cls, source: str | Path, error: ValidationError) -> ConfigError:
        return cls(source, [_describe(e) for e in error.errors(include_url=False)])


def key_path(loc: tuple[int | str, ...]) -> str:
    """`('kafka', 'topics', 0, 'partitions')` -> `kafka.topics[0].partitions`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _describe(error: Any) -> str:
    # Tagged unions and `after` validators add their own names to `loc`; keep only key names.
    loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    where = key_path(loc)
    if error["type"] == "missing":
        return f"key '{where}' is required but missing"
    if error["type"] == "extra_forbidden":
        return f"key '{where}' is not a known setting (check its spelling)"
    message = error["msg"].removeprefix("Value error, ")
    return f"key '{where}' has bad value {error['input']!r}: {message}"
