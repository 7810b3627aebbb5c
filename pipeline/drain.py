"""Drain a job's queries all at once: to their topics' end offsets, or to the end of input
with the watermark's last batch.

`processAllAvailable` returns only once a trigger finds no new data, so a query on a 30-second
trigger (the vehicle job's stats and trips) takes up to two triggers after its last data, and
a job's queries drained one after the other add those up (92-105 s of the vehicle demo's
drain). `drain_queries` watches every query at once, each by the end offsets of its latest
batch (Spark reports a batch's progress once its sink has committed): enough where the
watermark is known to have passed (the demo's end of input) or there is none. `drain_settled`
keeps `processAllAvailable`'s meaning, the watermark's last batch included, a trigger sooner:
Spark's commit log names the watermark of the next batch, so it tells whether a batch without
data will follow. `process_all_available` runs Spark's own waits at once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

from pyspark.sql.streaming import StreamingQuery

from core.config import StackConfig
from core.errors import StreamsimError
from core.kafka.offsets import end_offsets
from pipeline.progress import iso_ms, source_offsets

#: Topic -> partition -> end offset, taken the first time a query's progress names the topic.
Ends = dict[str, dict[int, int]]


def has_read_to_end(query: StreamingQuery, stack: StackConfig, ends: Ends) -> bool:
    """Whether `query`'s latest batch ended at or past `ends` on every topic it reads (the
    topics' end offsets are taken into `ends` on first sight). A query with no Kafka source
    in its progress has nothing to wait for; one with no progress yet has not started."""
    if query.exception() is not None:
        raise StreamsimError(f"query {query.name} failed: {query.exception()}")
    progress = query.lastProgress
    if not progress:
        return not query.isActive
    read = source_offsets(progress, "endOffset")
    if read is None:
        return True
    for topic, partitions in read.items():
        if topic not in ends:
            ends[topic] = end_offsets(stack, topic)
        if any(partitions.get(str(p), -1) < end for p, end in ends[topic].items()):
            return False
    return True


def drain_queries(
    queries: Iterable[StreamingQuery], stack: StackConfig, timeout_s: float = 600.0
) -> None:
    """Return once every query has read its topics to their end offsets (taken now)."""
    ends: Ends = {}
    pending = list(queries)
    deadline = time.monotonic() + timeout_s
    while True:
        pending = [q for q in pending if not has_read_to_end(q, stack, ends)]
        if not pending:
            return
        if time.monotonic() > deadline:
            names = ", ".join(str(q.name) for q in pending)
            raise StreamsimError(f"{names} did not read to the end of input in {timeout_s:.0f}s")
        time.sleep(0.5)


def commit_watermark(query: StreamingQuery, batch_id: int) -> int | None:
    """The watermark Spark committed for the batch after `batch_id` (its commit log's
    `nextBatchWatermarkMs`), or None when the checkpoint does not say."""
    try:
        root = query._jsq.streamingQuery().resolvedCheckpointRoot()
        path = Path(urlparse(str(root)).path) / "commits" / str(batch_id)
        lines = path.read_text().splitlines()
        return int(json.loads(lines[1])["nextBatchWatermarkMs"])
    except Exception:  # an internal API or a file that moved: the caller falls back
        return None


def is_settled(query: StreamingQuery, stack: StackConfig, ends: Ends) -> bool | None:
    """Whether a query has read its topics to the end and needs no further batch: its latest
    batch ran under the watermark Spark committed for the next one, so no batch without data
    will follow to apply a newer one. None when the checkpoint does not say."""
    if not has_read_to_end(query, stack, ends):
        return False
    progress = query.lastProgress
    if not progress or not query.isActive:
        return True
    watermark = iso_ms(progress.get("eventTime", {}).get("watermark"))
    if watermark is None:
        return True  # no watermark: no batch without data
    committed = commit_watermark(query, int(progress["batchId"]))
    return None if committed is None else committed <= watermark


def drain_settled(
    queries: Iterable[StreamingQuery],
    stack: StackConfig,
    timeout_s: float = 600.0,
    no_data_wait_s: float = 120.0,
) -> None:
    """`process_all_available`'s meaning without its idle trigger: return once every query
    has read its topics to the end and run the batch without data that its last watermark
    asks for (`is_settled`); `processAllAvailable` returns a trigger later, once a trigger
    finds nothing (30 s for the vehicle stats). The jobs' stateful operators (windows,
    de-duplication) run that batch whenever the watermark moved; a query whose checkpoint
    cannot be read, or that runs no such batch within `no_data_wait_s`, is left to
    `processAllAvailable`."""
    ends: Ends = {}
    pending, fallback = list(queries), []
    moved: dict[str, float] = {}  # query id -> when its read-to-end watermark was seen moved
    deadline = time.monotonic() + timeout_s

    def overdue(query: StreamingQuery) -> bool:
        since = moved.setdefault(str(query.id), time.monotonic())
        return time.monotonic() - since > no_data_wait_s

    while pending:
        still = []
        for query in pending:
            state = is_settled(query, stack, ends)
            if state is False and has_read_to_end(query, stack, ends) and overdue(query):
                state = None  # its watermark moved, and no batch without data came to apply it
            if state is None:
                fallback.append(query)
            elif state is False:
                still.append(query)
        pending = still
        if pending and time.monotonic() > deadline:
            names = ", ".join(str(q.name) for q in pending)
            raise StreamsimError(f"{names} did not settle at the end of input in {timeout_s:.0f}s")
        if pending:
            time.sleep(0.5)
    process_all_available(fallback)


def process_all_available(queries: list[StreamingQuery]) -> None:
    """`processAllAvailable` on every query at once: the wait is the slowest query's, not the
    sum. Unlike `drain_queries` it also waits for the batch that applies the watermark the
    last data moved (Spark's no-data batch), which emits the windows that watermark closes."""
    if not queries:
        return
    with ThreadPoolExecutor(max_workers=len(queries)) as pool:
        list(pool.map(lambda query: query.processAllAvailable(), queries))
