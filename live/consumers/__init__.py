"""The Kafka consumer threads that fill the panel's views."""
