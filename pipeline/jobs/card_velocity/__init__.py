"""Job `card-velocity`."""
