"""An in-memory sink for tests and a counting sink for benchmarks of the engine alone."""

from __future__ import annotations

from simulators.sinks.base import Records, SinkReport, Topics


class MemorySink:
    """Keeps every record; only for small runs."""

    def __init__(self) -> None:
        self.events = Records()
        self.truth = Records()
        self.topics: Topics | None = None

    def open(self, topics: Topics) -> None:
        self.topics = topics

    def write(self, events: Records, truth: Records) -> None:
        for mine, theirs in ((self.events, events), (self.truth, truth)):
            mine.keys += theirs.keys
            mine.values += theirs.values
            mine.timestamps += theirs.timestamps

    def pending(self) -> int:
        return 0

    def close(self) -> SinkReport:
        return SinkReport(written=len(self.events) + len(self.truth))


class NullSink:
    """Counts records and throws them away: measures the engine without any I/O."""

    def __init__(self) -> None:
        self.count = 0

    def open(self, topics: Topics) -> None:
        pass

    def write(self, events: Records, truth: Records) -> None:
        self.count += len(events) + len(truth)

    def pending(self) -> int:
        return 0

    def close(self) -> SinkReport:
        return SinkReport(written=self.count)
