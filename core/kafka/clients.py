"""librdkafka settings built from the stack config, so every client talks to the same cluster."""

from __future__ import annotations

from typing import Any

from core.config import StackConfig


def base_config(stack: StackConfig) -> dict[str, Any]:
    return {"bootstrap.servers": stack.kafka.bootstrap_servers, **stack.kafka.client}


def producer_config(stack: StackConfig, **overrides: Any) -> dict[str, Any]:
    """Idempotent, acks=all, batched and compressed: safe defaults that are also fast."""
    return {
        **base_config(stack),
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 20,
        "batch.size": 1_000_000,
        "compression.type": "lz4",
        "queue.buffering.max.messages": 500_000,
        "queue.buffering.max.kbytes": 512 * 1024,
        **overrides,
    }


def consumer_config(stack: StackConfig, group_id: str, **overrides: Any) -> dict[str, Any]:
    return {
        **base_config(stack),
        "group.id": group_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **overrides,
    }
