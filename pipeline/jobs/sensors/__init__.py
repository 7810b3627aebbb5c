"""Job `sensors`."""
