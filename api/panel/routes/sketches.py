"""`GET /v1/sketches`: the newest window's heavy hitters (Count-Min) and distinct counts
(HyperLogLog) per job and kind (`live.views.sketches`), estimates with their bounds, read from
the tail of their topics on request (cached for `CACHE_S`)."""

from __future__ import annotations

import threading
import time
from typing import Annotated, Any

import orjson
from confluent_kafka import KafkaException
from fastapi import APIRouter, HTTPException, Query, Request, status

from api.panel.deps import UNAVAILABLE, feeds_of
from api.panel.models.sketches import Sketches
from api.responses import OrjsonResponse
from core.config import StackConfig
from core.contracts import topics
from core.kafka.admin import admin_client
from core.kafka.offsets import end_offsets
from core.kafka.reader import topic_values
from live.views.sketches import sketch_view

router = APIRouter(prefix="/v1", tags=["read"])
Limit = Annotated[int, Query(ge=1, le=200)]

#: Records read back from the end of each partition: a few windows' worth.
TAIL = 500
#: A view is reused this long (the topics change once per window).
CACHE_S = 5.0
_cache: dict[str, tuple[float, list[dict[str, Any]]]] = {}
_lock = threading.Lock()


def tail_records(stack: StackConfig, topic: str, per_partition: int = TAIL) -> list[dict]:
    """The last `per_partition` JSON objects of each partition of `topic` ([] if absent;
    anything else is skipped)."""
    with _lock:
        hit = _cache.get(topic)
        if hit is not None and time.monotonic() - hit[0] < CACHE_S:
            return hit[1]
    if topic not in admin_client(stack).list_topics(timeout=10).topics:
        return []
    since = {p: max(0, end - per_partition) for p, end in end_offsets(stack, topic).items()}
    records = []
    for values in topic_values(stack, topic, since, timeout_s=10.0):
        for raw in values:
            try:
                value = orjson.loads(raw or b"null")
            except orjson.JSONDecodeError:
                continue
            if isinstance(value, dict):
                records.append(value)
    with _lock:
        _cache[topic] = (time.monotonic(), records)
    return records


@router.get(
    "/sketches",
    response_class=OrjsonResponse,
    responses={200: {"model": Sketches}, **UNAVAILABLE},
)
def sketches(request: Request, limit: Limit = 20) -> OrjsonResponse:
    """Per job and kind, the newest window's heavy hitters (`aggregates.heavy-hitters`:
    Count-Min estimates with ε, δ and ε·N) and distinct counts (`aggregates.distinct-counts`:
    HyperLogLog estimates with their relative standard error). 503 when Kafka is unreachable."""
    feeds = feeds_of(request)
    try:
        heavy = tail_records(feeds.stack, topics.HEAVY_HITTERS.name)
        distinct = tail_records(feeds.stack, topics.DISTINCT_COUNTS.name)
    except KafkaException as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, f"Kafka is unreachable: {exc.args[0]}"
        ) from None
    return OrjsonResponse(sketch_view(heavy, distinct, limit))
