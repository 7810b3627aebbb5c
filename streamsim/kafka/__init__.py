"""Kafka: the embedded local broker, topic administration, and client settings."""

from streamsim.kafka.admin import ensure_topics
from streamsim.kafka.clients import consumer_config, producer_config

__all__ = ["consumer_config", "ensure_topics", "producer_config"]
