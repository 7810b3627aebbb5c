"""JSONL files: DIR/events.jsonl in emit order, and DIR/truth.jsonl."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from core.errors import StreamsimError
from simulators.sinks.base import Records, SinkReport, Topics

BUFFER = 1 << 20


class JsonlSink:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._events: BinaryIO | None = None
        self._truth: BinaryIO | None = None
        self._report = SinkReport()

    @property
    def events_path(self) -> Path:
        return self.directory / "events.jsonl"

    @property
    def truth_path(self) -> Path:
        return self.directory / "truth.jsonl"

    def open(self, topics: Topics) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._events = self.events_path.open("wb", buffering=BUFFER)
            self._truth = self.truth_path.open("wb", buffering=BUFFER)
        except OSError as exc:
            raise StreamsimError(
                f"cannot write to {self.directory}: {exc.strerror or exc}"
            ) from None

    def write(self, events: Records, truth: Records) -> None:
        assert self._events is not None and self._truth is not None, "open() first"
        for out, records in ((self._events, events), (self._truth, truth)):
            if records.values:
                out.write(b"\n".join(records.values))
                out.write(b"\n")
        self._report.written += len(events) + len(truth)

    def pending(self) -> int:
        return 0

    def close(self) -> SinkReport:
        for f in (self._events, self._truth):
            if f is not None:
                f.close()
        return self._report
