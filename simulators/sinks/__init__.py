"""Sinks: Kafka, JSONL files, memory (tests) and null (engine-only benchmarks)."""

from simulators.sinks.base import Records, Sink, SinkReport, Topics
from simulators.sinks.jsonl import JsonlSink
from simulators.sinks.memory import MemorySink, NullSink

__all__ = ["JsonlSink", "MemorySink", "NullSink", "Records", "Sink", "SinkReport", "Topics"]
