"""Count a run's events in Kafka against its truth: what was lost, what was duplicated.

Truth holds one record per delivery attempt, keyed by event_id: a duplicate has the same
event_id (and `duplicate_of`), a record dropped by design has `dropped` set and was never
sent. So each event_id must appear in the event topics exactly as often as it has truth
records with `dropped` null; fewer is loss, more is an unexpected duplicate.

A broker that dies mid-request can also make a topic hold one send twice: librdkafka's
idempotent producer (without transactions) bumps its epoch when a request's fate is unknown and
sends its records again (confluentinc/librdkafka#4953). Chaos runs tag every send
(`SEND_TAG_HEADER`), so a copy whose tag was already read is such a resend: it is counted once,
and reported as `truth_resent` or `events_resent`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from confluent_kafka import Message

from core.config import StackConfig
from core.contracts import topics
from core.kafka.admin import admin_client
from core.kafka.reader import topic_messages

#: A record and its send tag (None when its producer did not tag its sends).
Tagged = tuple[dict[str, Any], bytes | None]


@dataclass(frozen=True)
class Ledger:
    expected: int  # delivery attempts truth says were sent
    found: int  # event records of the run in the topics
    lost: int
    unexpected_duplicates: int
    truth_records: int  # distinct truth records of the run
    truth_resent: int = 0  # truth records read again under a tag already read: resends
    events_resent: int = 0  # event records likewise


def count_against_truth(
    stack: StackConfig, scenario: str, id_prefix: str, event_topics: list[str] | None = None
) -> Ledger:
    """Read the run's truth topic and its event topics (default: every topic that is not
    truth, metrics or dead-letter) and compare per event id."""
    if event_topics is None:
        event_topics = sorted(
            name
            for name in admin_client(stack).list_topics(timeout=10).topics
            if not name.startswith("__")
            and not topics.is_truth(name)
            and name not in (topics.METRICS.name, topics.DEADLETTER.name)
        )
    events = (record for name in event_topics for record in _tagged(stack, name))
    return tally(_tagged(stack, topics.truth(scenario).name), events, id_prefix)


def _tagged(stack: StackConfig, topic: str) -> Iterator[Tagged]:
    for batch in topic_messages(stack, topic):
        for msg in batch:
            value = orjson.loads(msg.value() or b"null")
            if isinstance(value, dict):
                yield value, _send_tag(msg)


def _send_tag(msg: Message) -> bytes | None:
    tag = dict(msg.headers() or {}).get(topics.SEND_TAG_HEADER)
    return tag if isinstance(tag, bytes) else None


def tally(truth: Iterable[Tagged], events: Iterable[Tagged], id_prefix: str) -> Ledger:
    """Compare the run's events (ids starting with `id_prefix`) with its truth records, per
    event id, each send counted once."""
    read, distinct = _once_per_send(truth, id_prefix)
    expected = Counter(r["event_id"] for r in distinct if r.get("dropped") is None)
    events_read, events_distinct = _once_per_send(events, id_prefix)
    found = Counter(r["event_id"] for r in events_distinct)
    return Ledger(
        expected=sum(expected.values()),
        found=sum(found.values()),
        lost=sum((expected - found).values()),
        unexpected_duplicates=sum((found - expected).values()),
        truth_records=len(distinct),
        truth_resent=read - len(distinct),
        events_resent=events_read - len(events_distinct),
    )


def _once_per_send(records: Iterable[Tagged], id_prefix: str) -> tuple[int, list[dict[str, Any]]]:
    """How many of the run's records were read, and those records with each tagged send once."""
    read, seen, kept = 0, set(), []
    for record, tag in records:
        event_id = record.get("event_id")
        if not (isinstance(event_id, str) and event_id.startswith(id_prefix)):
            continue
        read += 1
        if tag is None or tag not in seen:
            kept.append(record)
            if tag is not None:
                seen.add(tag)
    return read, kept
