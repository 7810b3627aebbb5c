"""Apply a configured trigger to a stream writer, and remember which mode each query runs in.

Spark 4.2's Real-time Mode runs stateless queries only (projections, filters, unions,
stream-static joins) and only in the `update` output mode; a stateful query asked for it runs
in micro-batches instead (`query_trigger`). A Real-time Mode query also holds one task slot
per source partition for its whole batch, so where that would leave no slot for the job's
micro-batch queries it runs in micro-batches too (`realtime_fits`). `start_query` records the
mode a query really runs in and why, so a job and `streamsim pipeline run` can report it
(`query_mode`, `query_note`).
"""

from __future__ import annotations

from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from pipeline.settings import TriggerSettings

MICROBATCH = TriggerSettings(mode="microbatch", interval="0 seconds")

_MODES: dict[str, str] = {}  # query id -> the trigger mode it was started with
_NOTES: dict[str, str] = {}  # query id -> why it runs in another mode than configured


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


def realtime_fits(
    trigger: TriggerSettings, partitions: int, slots: int, busy_queries: int = 1
) -> tuple[TriggerSettings, str | None]:
    """The trigger, or micro-batches (and why) when Real-time Mode would take every slot.

    A Real-time Mode query runs one long task per source partition for its whole batch; the
    other queries need at least `busy_queries` slots between them. The fallback runs a batch
    per the trigger's interval, not back to back: it would take the cores from the others.

    >>> realtime = TriggerSettings(mode="realtime", interval="5 seconds")
    >>> realtime_fits(realtime, partitions=1, slots=2)[0].mode
    'realtime'
    >>> trigger, note = realtime_fits(realtime, partitions=3, slots=2)
    >>> trigger.mode, trigger.interval
    ('microbatch', '5 seconds')
    >>> note
    'Real-time Mode would hold 3 of 2 task slots, leaving the others none'
    """
    if trigger.mode != "realtime" or partitions + busy_queries <= slots:
        return trigger, None
    return MICROBATCH.model_copy(update={"interval": trigger.interval}), (
        f"Real-time Mode would hold {partitions} of {slots} task slots, leaving the others "
        f"{'none' if partitions >= slots else slots - partitions}"
    )


def output_mode(trigger: TriggerSettings) -> str:
    """Real-time Mode needs `update`; a stateless query emits the same rows in either mode."""
    return "update" if trigger.mode == "realtime" else "append"


def start_query(
    writer: DataStreamWriter, name: str, trigger: TriggerSettings, note: str | None = None
) -> StreamingQuery:
    """Start `writer` as query `name` with `trigger`; `query_mode` and `query_note` tell."""
    query = with_trigger(writer, trigger).queryName(name).start()
    _MODES[str(query.id)] = trigger.mode
    if note:
        _NOTES[str(query.id)] = note
    else:
        _NOTES.pop(str(query.id), None)
    return query


def query_mode(query: StreamingQuery) -> str | None:
    """realtime, microbatch or available_now for a query started by `start_query`."""
    return _MODES.get(str(query.id))


def query_note(query: StreamingQuery) -> str | None:
    """Why a query runs in micro-batches although Real-time Mode was asked for, if it does."""
    return _NOTES.get(str(query.id))
