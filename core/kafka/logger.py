"""The logger librdkafka's own messages go to, with repeats held back.

While a broker is down, librdkafka reports the same connection failure several times a
second. `RepeatFilter` lets the first of a kind through, then at most one per `window_s`
(with how many were held back), so an outage shows in the log without drowning it.
"""

from __future__ import annotations

import logging
import re
import time

_DIGITS = re.compile(r"\d+")


class RepeatFilter(logging.Filter):
    def __init__(self, window_s: float = 30.0) -> None:
        super().__init__()
        self.window_s = window_s
        self._last: dict[str, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = _DIGITS.sub("#", record.getMessage())
        now = time.monotonic()
        seen = self._last.get(key)
        if seen is not None and now - seen[0] < self.window_s:
            self._last[key] = (seen[0], seen[1] + 1)
            return False
        if seen is not None and seen[1]:
            record.msg = f"{record.getMessage()} ({seen[1]} more like it in {self.window_s:.0f} s)"
            record.args = None
        if len(self._last) > 1000:
            self._last.clear()
        self._last[key] = (now, 0)
        return True


def kafka_logger(name: str) -> logging.Logger:
    """Logger `name` for a librdkafka client's `logger` setting, with a `RepeatFilter`
    (attached once)."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, RepeatFilter) for f in logger.filters):
        logger.addFilter(RepeatFilter())
    return logger
