"""Kafka: the embedded local broker, topic administration, and client settings."""

from core.kafka.admin import ensure_topics
from core.kafka.clients import consumer_config, producer_config

__all__ = ["consumer_config", "ensure_topics", "producer_config"]
