"""Events to three topics by what they are about: positions by ship, readings by container,
port events by port (the keys of docs/design.md). The engine writes one events stream; this
wrapper splits it by key (an IMO number, a container number or a UN/LOCODE differ in length).
Non-Kafka sinks (JSONL, memory) get every event in one stream, as the `simulate --sink jsonl`
contract says.
"""

from __future__ import annotations

import numpy as np

from scenarios.shipping.topics import CONTAINERS, PORT_EVENTS, POSITIONS, TOPIC_BY_KEY_LENGTH
from simulators.sinks.base import Records, Sink, SinkReport, Topics
from simulators.sinks.kafka import KafkaSink


class ShippingTopics:
    def __init__(self, inner: Sink) -> None:
        self.inner = inner
        self.kafka = isinstance(inner, KafkaSink)
        self.truth_topic = ""

    def open(self, topics: Topics) -> None:
        self.truth_topic = topics.truth
        self.inner.open(topics)
        inner = self.inner
        if isinstance(inner, KafkaSink) and inner.create_topics:
            from core.kafka import ensure_topics

            ensure_topics(inner.stack, [POSITIONS, CONTAINERS, PORT_EVENTS])

    def write(self, events: Records, truth: Records) -> None:
        inner = self.inner
        if not isinstance(inner, KafkaSink):
            inner.write(events, truth)
            return
        for topic, part in split(events).items():
            inner._produce(topic, part)
        inner._produce(self.truth_topic, truth)
        assert inner._producer is not None
        inner._producer.poll(0)

    def pending(self) -> int:
        return self.inner.pending()

    def close(self) -> SinkReport:
        return self.inner.close()


def split(events: Records) -> dict[str, Records]:
    """The records of each topic, in their order (most batches hold one kind only)."""
    n = len(events.keys)
    if n == 0:
        return {}
    lengths = np.fromiter(map(len, events.keys), dtype=np.int64, count=n)
    out: dict[str, Records] = {}
    for length in np.unique(lengths).tolist():
        topic = TOPIC_BY_KEY_LENGTH[length]
        pick = np.flatnonzero(lengths == length)
        if pick.size == n:
            out[topic] = events
            continue
        at = pick.tolist()
        keys, values, stamps = events.keys, events.values, events.timestamps
        out[topic] = Records(
            [keys[i] for i in at], [values[i] for i in at], [stamps[i] for i in at]
        )
    return out
