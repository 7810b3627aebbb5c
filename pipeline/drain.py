"""Drain a job's queries all at once: to their topics' end offsets, or as `processAllAvailable`.

`processAllAvailable` returns only once a trigger finds no new data, so a query on a 30-second
trigger (the vehicle job's stats and trips) takes up to two triggers, and a job's queries
drained one after the other add those up (92-105 s of the vehicle demo's drain).
`drain_queries` watches every query at once, each by the end offsets of its latest batch (Spark
reports a batch's progress once its sink has committed): enough where the watermark is known to
have passed (the demo's end of input) or there is none. `process_all_available` keeps Spark's
meaning, the watermark's last batch included, and runs the queries' waits at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from pyspark.sql.streaming import StreamingQuery

from core.config import StackConfig
from core.errors import StreamsimError
from core.kafka.offsets import end_offsets
from pipeline.progress import source_offsets

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


def process_all_available(queries: list[StreamingQuery]) -> None:
    """`processAllAvailable` on every query at once: the wait is the slowest query's, not the
    sum. Unlike `drain_queries` it also waits for the batch that applies the watermark the
    last data moved (Spark's no-data batch), which emits the windows that watermark closes."""
    if not queries:
        return
    with ThreadPoolExecutor(max_workers=len(queries)) as pool:
        list(pool.map(lambda query: query.processAllAvailable(), queries))
