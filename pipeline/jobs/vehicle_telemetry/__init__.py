"""Job `vehicle-telemetry`."""
