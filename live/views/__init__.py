"""Pure in-memory views of the topics (no Kafka), what the panel routes read."""
