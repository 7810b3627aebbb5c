"""Apply a configured trigger to a stream writer, and remember which mode each query runs in.

Spark 4.2's Real-time Mode runs stateless queries only (projections, filters, unions,
stream-static joins) and only in the `update` output mode; a stateful query asked for it runs
in micro-batches instead (`query_trigger`). `start_query` records the mode a query really runs
in, so a job and `streamsim pipeline run` can report it (`query_mode`).
"""

from __future__ import annotations

from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from pipeline.config import TriggerSettings

MICROBATCH = TriggerSettings(mode="microbatch", interval="0 seconds")

_MODES: dict[str, str] = {}  # query id -> the trigger mode it was started with


def with_trigger(writer: DataStreamWriter, trigger: TriggerSettings) -> DataStreamWriter:
    if trigger.mode == "available_now":
        return writer.trigger(availableNow=True)
    if trigger.mode == "realtime":
        return writer.trigger(realTime=trigger.interval)  # type: ignore[call-overload]
    return writer.trigger(processingTime=trigger.interval)


def query_trigger(trigger: TriggerSettings, stateful: bool) -> TriggerSettings:
    """The trigger a query can run with: a stateful query never runs in Real-time Mode.

    >>> query_trigger(TriggerSettings(mode="realtime", interval="5 seconds"), True).mode
    'microbatch'
    >>> query_trigger(TriggerSettings(mode="realtime", interval="5 seconds"), False).mode
    'realtime'
    """
    if stateful and trigger.mode == "realtime":
        return MICROBATCH
    return trigger


def output_mode(trigger: TriggerSettings) -> str:
    """Real-time Mode needs `update`; a stateless query emits the same rows in either mode."""
    return "update" if trigger.mode == "realtime" else "append"


def start_query(writer: DataStreamWriter, name: str, trigger: TriggerSettings) -> StreamingQuery:
    """Start `writer` as query `name` with `trigger`, recording its mode for `query_mode`."""
    query = with_trigger(writer, trigger).queryName(name).start()
    _MODES[str(query.id)] = trigger.mode
    return query


def query_mode(query: StreamingQuery) -> str | None:
    """realtime, microbatch or available_now for a query started by `start_query`."""
    return _MODES.get(str(query.id))
