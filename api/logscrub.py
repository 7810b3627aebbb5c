"""Logging that never writes a PAN: a filter on every handler of the API server.

`PanScrubFilter` masks PAN-like digit runs in a record's message, arguments and formatted
traceback before any handler formats it, so uvicorn's access lines (a PAN pasted into a URL),
error lines and exception messages (a pydantic error quoting its input) come out masked.
`log_config()` is uvicorn's default logging config with the filter on each handler, plus the
`api` loggers.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from uvicorn.config import LOGGING_CONFIG

from core.pan import scrub, scrub_text

_FORMATTER = logging.Formatter()


class PanScrubFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = scrub_text(record.msg)
        else:
            record.msg = scrub_text(str(record.msg))
        if isinstance(record.args, dict):
            record.args = scrub(record.args)
        elif record.args:
            record.args = tuple(scrub(arg) for arg in record.args)
        if record.exc_info and not record.exc_text:
            record.exc_text = _FORMATTER.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub_text(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub_text(record.stack_info)
        return True


def log_config(access_log: bool = True, level: str = "INFO") -> dict[str, Any]:
    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {"pan_scrub": {"()": "api.logscrub.PanScrubFilter"}}
    for handler in config["handlers"].values():
        handler["filters"] = ["pan_scrub"]
    config["loggers"]["api"] = {"handlers": ["default"], "level": level, "propagate": False}
    config["loggers"]["uvicorn.error"]["level"] = level
    config["root"] = {"handlers": ["default"], "level": "WARNING"}  # libraries' own loggers
    if not access_log:
        config["loggers"]["uvicorn.access"]["handlers"] = []
    return config
