"""The verdict body: a pure function of the decision's `cards.activity` record.

A restarted endpoint that rebuilt its state from the topic, or another instance that applied
the record, answers a repeated transaction_id byte for byte as the deciding instance did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from core.contracts import CARD_ACTIVITY

#: The record's keys that make up the response body, in order.
RESPONSE_KEYS = tuple(
    f.name
    for f in CARD_ACTIVITY.pick(
        (
            "transaction_id",
            "card_token",
            "card_last4",
            "decision",
            "score",
            "reasons",
            "evidence",
            "decided_at",
        )
    )
)


def response_body(record: Mapping[str, Any]) -> bytes:
    """The verdict body of a record."""
    return orjson.dumps({key: record[key] for key in RESPONSE_KEYS})


def body_of_value(value: bytes) -> bytes:
    """The verdict body of a record as published (its JSON bytes)."""
    return response_body(orjson.loads(value))
