"""Logging that never writes a PAN: a filter on every handler of the API server.

`PanScrubFilter` formats a record's message with its arguments (whatever their types: a
number, a dict, an exception) and looks for PANs in the result (`core.pan.scrub_text`: split
by any separators, or with digits glued on). If it finds one, the record keeps the masked text
and no arguments (uvicorn's access lines, whose formatter needs the arguments, keep them, each
masked). It masks the formatted traceback and stack too. So uvicorn's access lines (a PAN
pasted into a URL), error lines and exception messages (a pydantic error quoting its input)
come out masked, however the PAN was split across the arguments.
`log_config()` is uvicorn's default logging config with the filter on each handler, plus the
`api` loggers.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from uvicorn.config import LOGGING_CONFIG

from core.pan import scrub_text

_FORMATTER = logging.Formatter()
ACCESS_LOGGER = "uvicorn.access"


def _scrub_arg(arg: object) -> object:
    """`arg` itself when its text holds no PAN (an int stays an int), else its masked text."""
    text = arg if isinstance(arg, str) else str(arg)
    clean = scrub_text(text)
    return arg if clean == text else clean


class PanScrubFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: the message and the args as they are
            message = f"{record.msg} {record.args!r}"
            record.args = None
        clean = scrub_text(message)
        if clean != message:
            if record.name == ACCESS_LOGGER and isinstance(record.args, tuple):
                # uvicorn's access formatter takes the args one by one: scrub each in place.
                record.args = tuple(_scrub_arg(arg) for arg in record.args)
            else:
                record.msg, record.args = clean, None
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
    for name in ("api", "live"):  # the endpoint and panel, and the panel's topic views
        config["loggers"][name] = {"handlers": ["default"], "level": level, "propagate": False}
    config["loggers"]["uvicorn.error"]["level"] = level
    config["root"] = {"handlers": ["default"], "level": "WARNING"}  # libraries' own loggers
    if not access_log:
        config["loggers"]["uvicorn.access"]["handlers"] = []
    return config
