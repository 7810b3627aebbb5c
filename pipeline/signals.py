"""The signal that asks a running `streamsim pipeline run` to drain: process what its topics
hold at that moment, then stop its queries and exit 0. The panel's runs send it once their
simulator has finished, so a job slower than the simulator still judges the whole run."""

from __future__ import annotations

import signal

DRAIN_SIGNAL = signal.SIGUSR1
