"""Compacted topics (`cleanup.policy=compact`): the latest record per key is kept forever, so
a consumer rebuilds every entity's state by reading the topic from the beginning (e.g.
`cards.profiles`). Created compacted when missing, whoever comes first: producer or consumer."""

from __future__ import annotations

from confluent_kafka.admin import NewTopic

from core.config import StackConfig
from core.kafka.admin import admin_client


def ensure_compacted(stack: StackConfig, topic: str, timeout_s: float = 30.0) -> bool:
    """Create `topic` compacted unless it exists; True when this call created it."""
    admin = admin_client(stack)
    if topic in admin.list_topics(timeout=timeout_s).topics:
        return False
    settings = stack.kafka.topic(topic)
    new = NewTopic(
        topic,
        num_partitions=settings.partitions,
        replication_factor=getattr(settings, "replication_factor", None) or -1,
        config={"cleanup.policy": "compact"},
    )
    for future in admin.create_topics([new]).values():
        try:
            future.result(timeout=timeout_s)
        except Exception as exc:  # created meanwhile by another client
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
            return False
    return True
