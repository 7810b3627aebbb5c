"""Count a run's events in Kafka against its truth: what was lost, what was duplicated.

Truth holds one record per delivery attempt, keyed by event_id: a duplicate has the same
event_id (and `duplicate_of`), a record dropped by design has `dropped` set and was never
sent. So each event_id must appear in the event topics exactly as often as it has truth
records with `dropped` null; fewer is loss, more is an unexpected duplicate.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

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
    truth_records: int


def count_against_truth(
    stack: StackConfig, scenario: str, id_prefix: str, event_topics: list[str] | None = None
) -> Ledger:
    """Read the run's truth topic and its event topics (default: every topic that is not
    truth, metrics or dead-letter) and compare per event id."""
    truth_records = [
        r
        for r in read_topic(stack, topics.truth(scenario).name)
        if str(r.get("event_id", "")).startswith(id_prefix)
    ]
    expected = Counter(r["event_id"] for r in truth_records if r.get("dropped") is None)
    if event_topics is None:
        event_topics = sorted(
            name
            for name in admin_client(stack).list_topics(timeout=10).topics
            if not name.startswith("__")
            and not topics.is_truth(name)
            and name not in (topics.METRICS.name, topics.DEADLETTER.name)
        )
    found: Counter[str] = Counter()
    for name in event_topics:
        for record in read_topic(stack, name):
            event_id = record.get("event_id")
            if isinstance(event_id, str) and event_id.startswith(id_prefix):
                found[event_id] += 1
    lost = sum((expected - found).values())
    extra = sum((found - expected).values())
    return Ledger(sum(expected.values()), sum(found.values()), lost, extra, len(truth_records))
