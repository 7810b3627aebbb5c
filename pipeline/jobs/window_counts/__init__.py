"""Job `window-counts`."""
