"""Apply a configured trigger to a stream writer."""

from __future__ import annotations

from pyspark.sql.streaming import DataStreamWriter

from pipeline.config import TriggerSettings


def with_trigger(writer: DataStreamWriter, trigger: TriggerSettings) -> DataStreamWriter:
    if trigger.mode == "available_now":
        return writer.trigger(availableNow=True)
    if trigger.mode == "realtime":
        return writer.trigger(realTime=trigger.interval)
    return writer.trigger(processingTime=trigger.interval)
