"""`python -m api.simulate_child ARGS`: `streamsim simulate ARGS`, stopped by SIGTERM like Ctrl-C.

The run manager (`api.runs`) starts scenario runs with this. SIGTERM raises KeyboardInterrupt
in the simulator, so the engine's `finally` closes the sink and the Kafka producer flushes what
it holds before the process exits (code 130), instead of dying with records in its buffer.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the flush
    raise KeyboardInterrupt


def main() -> None:
    signal.signal(signal.SIGTERM, _interrupt)
    sys.argv = ["streamsim", "simulate", *sys.argv[1:]]
    from streamsim.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
