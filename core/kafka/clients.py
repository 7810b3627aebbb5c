"""librdkafka settings built from the stack config, so every client talks to the same cluster."""

from __future__ import annotations

import logging
from typing import Any

from core.config import StackConfig

#: In-process clients log through this Python logger, not librdkafka's stderr: a broker that
#: stops before its clients would otherwise print "Connection refused" lines to the terminal.
#: `pipeline.session` routes it to the Spark log; unrouted, Python prints warnings and errors.
CLIENT_LOGGER = "streamsim.kafka"


def base_config(stack: StackConfig) -> dict[str, Any]:
    return {
        "bootstrap.servers": stack.kafka.bootstrap_servers,
        "logger": logging.getLogger(CLIENT_LOGGER),
        **stack.kafka.client,
    }


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
