"""The sink interface: where events and truth records go."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Topics:
    events: str
    truth: str


@dataclass
class Records:
    """Records for one destination, as parallel lists (what producers consume directly)."""

    keys: list[bytes] = field(default_factory=list)
    values: list[bytes] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.values)


@dataclass
class SinkReport:
    written: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    backpressure_waits: int = 0
    details: dict[str, Any] = field(default_factory=dict)  # sink-specific figures for the summary


class Sink(Protocol):
    def open(self, topics: Topics) -> None: ...

    def write(self, events: Records, truth: Records) -> None:
        """Write events (already in emit order) and their truth records."""
        ...

    def pending(self) -> int:
        """Records handed over but not yet confirmed (0 for synchronous sinks)."""
        ...

    def close(self) -> SinkReport: ...
