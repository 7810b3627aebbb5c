"""Job `vehicles`."""
