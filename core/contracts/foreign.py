"""The alert a system that is not ours writes to be scored (`streamsim evaluate SCENARIO
--alerts-topic TOPIC` or `--alerts-file FILE`): `ALERT`'s fields, of which `REQUIRED` must be
there; the rest may be left out (or null) but have their type when present, and keys that are
not fields are ignored. The check (`check`, `parse`) and the JSON Schema (`json_schema`,
`docs/contracts/alert.schema.json`) both derive from those fields: one definition.

Scoring matches an alert to truth by the event ids it judged (`event_ids`, the `event_id` of
each event it read), as it does our own alerts (`streamsim.evaluate.scoring`). `alert_id`,
when given, makes a replayed alert count once; `detected_at` (epoch ms, wall clock) gives the
alert a latency in a paced run.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import replace
from typing import Any

from core.contracts import topics
from core.contracts.alerts import ALERT
from core.contracts.events import Field, Record
from core.contracts.labels import LABELS

#: What an alert must hold to be scored: its label type, the entity, the event time of the
#: event that fired it and the events it judged.
REQUIRED = ("label", "entity_id", "event_time", "event_ids")

#: `label` may be null on our alerts topic; here it is required.
_LABEL_DOC = "The label type it targets: one of the scored scenario's types."

FOREIGN_ALERT = Record(
    "alert.foreign",
    tuple(
        replace(
            f,
            nullable=f.name not in REQUIRED,
            optional=f.name not in REQUIRED,
            doc=_LABEL_DOC if f.name == "label" else f.doc,
        )
        for f in ALERT.fields
    ),
    "An alert from any system, as `streamsim evaluate --alerts-topic/--alerts-file` scores it.",
    topics.ALERTS,
)

#: Why a record is not scored (`missing_field` and `wrong_type` name the field: `reason:field`).
BAD_JSON = "bad_json"
NOT_AN_OBJECT = "not_an_object"
MISSING_FIELD = "missing_field"
WRONG_TYPE = "wrong_type"
UNKNOWN_LABEL = "unknown_label"
REASONS = (BAD_JSON, NOT_AN_OBJECT, MISSING_FIELD, WRONG_TYPE, UNKNOWN_LABEL)

#: JSON Schema types by field type (`json`: any value).
_JSON_TYPES = {
    "string": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "strings": "array",
    "object": "object",
}


def fits(f: Field, value: Any) -> bool:
    """Whether a non-null `value` has `f`'s JSON type (an integer may be written as 5.0, as
    JSON Schema allows).

    >>> event_time = FOREIGN_ALERT.field("event_time")
    >>> fits(event_time, 5), fits(event_time, 5.0), fits(event_time, 5.5), fits(event_time, True)
    (True, True, False, False)
    """
    if f.type == "json":
        return True
    if isinstance(value, bool):
        return f.type == "bool"
    if f.type == "int":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if f.type == "float":
        return isinstance(value, int | float)
    if f.type == "strings":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    kind = {"string": str, "bool": bool, "object": dict}[f.type]
    return isinstance(value, kind) and (not f.choices or value in f.choices)


def check(record: Any, labels: Collection[str]) -> str | None:
    """Why `record` (a parsed JSON value) is not an alert in the contract with one of the
    scenario's `labels`, or None. The first reason only: a required field missing (or null),
    then a field of the wrong type, then a label of no scored type.

    >>> ok = {"label": "spike", "entity_id": "s1", "event_time": 1, "event_ids": ["e1"]}
    >>> check(ok, ["spike"]), check(ok | {"detected_at": None, "extra": 1}, ["spike"])
    (None, None)
    >>> check({**ok, "event_ids": None}, ["spike"]), check({**ok, "event_ids": "e1"}, ["spike"])
    ('missing_field:event_ids', 'wrong_type:event_ids')
    >>> check({**ok, "label": "catch_all"}, ["spike"]), check([ok], ["spike"])
    ('unknown_label', 'not_an_object')
    """
    if not isinstance(record, dict):
        return NOT_AN_OBJECT
    for name in REQUIRED:
        if record.get(name) is None:
            return f"{MISSING_FIELD}:{name}"
    for f in FOREIGN_ALERT.fields:
        value = record.get(f.name)
        if value is not None and not fits(f, value):
            return f"{WRONG_TYPE}:{f.name}"
    if record["label"] not in labels:
        return UNKNOWN_LABEL
    return None


def parse(
    raw: bytes | str | None, labels: Collection[str]
) -> tuple[dict[str, Any] | None, str | None]:
    """One record as read (a Kafka value, None for a tombstone; a line of a file): the alert,
    or None and why not (`check`, or `bad_json`)."""
    try:
        record = json.loads(raw if raw is not None else "null")
    except (ValueError, TypeError):
        return None, BAD_JSON
    reason = check(record, labels)
    return (record, None) if reason is None else (None, reason)


def all_labels() -> list[str]:
    """Every scenario's label types, each once, in scenario order."""
    return list(dict.fromkeys(label for types in LABELS.values() for label in types))


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a foreign alert; `label` is one of every scenario's
    types here, and one of the scored scenario's when scored."""
    properties: dict[str, Any] = {}
    for f in FOREIGN_ALERT.fields:
        prop: dict[str, Any] = {}
        if f.type in _JSON_TYPES:
            kind = _JSON_TYPES[f.type]
            prop["type"] = [kind, "null"] if f.nullable else kind
        if f.type == "strings":
            prop["items"] = {"type": "string"}
        if f.name == "label":
            prop["enum"] = all_labels()
        prop["description"] = f.doc
        properties[f.name] = prop
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "streamsim alert",
        "description": FOREIGN_ALERT.doc
        + " One JSON object per Kafka record or per line; keys not listed are ignored.",
        "type": "object",
        "required": list(REQUIRED),
        "properties": properties,
    }
