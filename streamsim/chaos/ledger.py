"""Count a run's events in Kafka against its truth: what was lost, what was duplicated.

Truth holds one record per delivery attempt, keyed by event_id: a duplicate has the same
event_id (and `duplicate_of`), a record dropped by design has `dropped` set and was never
sent. So each event_id must appear in the event topics exactly as often as it has truth
records with `dropped` null; fewer is loss, more is an unexpected duplicate.

Truth itself can hold a record twice when a broker dies mid-request: librdkafka's idempotent
producer (without transactions) bumps its epoch when a request's fate is unknown and sends
its records again (confluentinc/librdkafka#4953). The simulator never writes two identical
truth records (a retry differs from its original in `duplicate_of`), so an identical pair is
such a resend: it is counted once, and reported as `truth_resent`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from core.config import StackConfig
from core.contracts import topics
from core.kafka.admin import admin_client
from core.kafka.reader import read_topic


@dataclass(frozen=True)
class Ledger:
    expected: int  # delivery attempts truth says were sent
    found: int  # event records of the run in the topics
    lost: int
    unexpected_duplicates: int
    truth_records: int  # distinct truth records of the run
    truth_resent: int = 0  # identical truth records beyond the first: producer resends


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
    events = (record for name in event_topics for record in read_topic(stack, name))
    return tally(read_topic(stack, topics.truth(scenario).name), events, id_prefix)


def tally(
    truth: Iterable[dict[str, Any]], events: Iterable[dict[str, Any]], id_prefix: str
) -> Ledger:
    """Compare the run's events (ids starting with `id_prefix`) with its distinct truth
    records, per event id."""
    read = [r for r in truth if str(r.get("event_id", "")).startswith(id_prefix)]
    distinct = list({orjson.dumps(r, option=orjson.OPT_SORT_KEYS): r for r in read}.values())
    expected = Counter(r["event_id"] for r in distinct if r.get("dropped") is None)
    found: Counter[str] = Counter()
    for record in events:
        event_id = record.get("event_id")
        if isinstance(event_id, str) and event_id.startswith(id_prefix):
            found[event_id] += 1
    return Ledger(
        expected=sum(expected.values()),
        found=sum(found.values()),
        lost=sum((expected - found).values()),
        unexpected_duplicates=sum((found - expected).values()),
        truth_records=len(distinct),
        truth_resent=len(read) - len(distinct),
    )
