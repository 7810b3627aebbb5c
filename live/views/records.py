"""Raw Kafka values into records: what every view's `add_raw` does first."""

from __future__ import annotations

from typing import Any

import orjson


def json_object(value: bytes | None) -> dict[str, Any] | None:
    """The JSON object `value` holds; None when it is empty, not JSON or not an object (the
    caller counts it as malformed).

    >>> json_object(b'{"a": 1}'), json_object(b"[1]"), json_object(b"{"), json_object(None)
    ({'a': 1}, None, None, None)
    """
    try:
        record = orjson.loads(value or b"")
    except orjson.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None
