"""Job `cards`."""
