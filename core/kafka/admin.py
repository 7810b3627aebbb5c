"""Topic administration via `confluent_kafka.admin`; partitions and retention from config."""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from core.config import StackConfig
from core.kafka.clients import base_config


def admin_client(stack: StackConfig, quiet: bool = False) -> AdminClient:
    """`quiet` silences librdkafka's connection-refused lines (for probes that expect them)."""
    return AdminClient({**base_config(stack), **({"log_level": 0} if quiet else {})})


def is_reachable(stack: StackConfig, timeout_s: float = 2.0) -> bool:
    """True when the cluster answers a metadata request within the timeout."""
    try:
        admin_client(stack, quiet=True).list_topics(timeout=timeout_s)
    except KafkaException:
        return False
    return True


def ensure_topics(
    stack: StackConfig,
    names: Iterable[str],
    partitions: int | None = None,
    timeout_s: float = 30.0,
) -> list[str]:
    """Create the topics that don't exist yet; returns the names created.

    Partitions, retention and replication come from `kafka.topic_overrides`, else
    `kafka.topics`;
    `partitions` overrides both (e.g. 1 where a test needs a total order).
    """
    admin = admin_client(stack)
    existing = set(admin.list_topics(timeout=timeout_s).topics)
    missing = sorted(set(names) - existing)
    if not missing:
        return []
    new = []
    for name in missing:
        settings = stack.kafka.topic(name)
        config = {
            "retention.ms": str(settings.retention_ms),
            "retention.bytes": str(settings.retention_bytes),
        }
        if settings.min_insync_replicas is not None:
            config["min.insync.replicas"] = str(settings.min_insync_replicas)
        new.append(
            NewTopic(
                name,
                num_partitions=partitions or settings.partitions,
                # Unset: the cluster's default.replication.factor (3 on a local 3-node cluster).
                replication_factor=settings.replication_factor or -1,
                config=config,
            )
        )
    for future in admin.create_topics(new, operation_timeout=timeout_s).values():
        try:
            future.result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    _wait_for_leaders(admin, missing, timeout_s)
    return missing


def _wait_for_leaders(admin: AdminClient, topics: list[str], timeout_s: float) -> None:
    """A created topic serves reads and writes only once each partition has a leader."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        metadata = admin.list_topics(timeout=timeout_s).topics
        if all(
            t in metadata
            and metadata[t].partitions
            and all(p.leader >= 0 for p in metadata[t].partitions.values())
            for t in topics
        ):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topics {topics} have no partition leaders after {timeout_s:.0f}s")


def delete_topics(stack: StackConfig, names: Iterable[str], timeout_s: float = 30.0) -> None:
    admin = admin_client(stack)
    for future in admin.delete_topics(list(names), operation_timeout=timeout_s).values():
        try:
            future.result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
