"""The alert struct the engine forms build, and the step from its key text to `alert_id`.

`detectors.alert.alert_id_for` hashes `rule`, `entity_id` and the rule's key with BLAKE2b,
which Spark's SQL functions lack. The engine forms carry the key text instead (the key parts
joined by `KEY_SEP`, the id's input); `with_alert_ids` hashes it on the driver, where the
`AlertSink` collects a batch's few alert rows anyway. So each form's id is the Python forms' id
for the same readings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F

from detectors import alert_id_for
from detectors.alert import MAX_EVENT_IDS

#: Joins the key parts in the key text (never inside an event id or entity id).
KEY_SEP = "\x1f"
#: The alert struct's fields: the alert row's, with `alert_id` holding the key text.
FIELDS = ("alert_id", "rule", "label", "entity_id", "event_time", "event_ids", "evidence")
#: The type of an array of alert structs.
ALERTS = (
    "array<struct<alert_id:string,rule:string,label:string,entity_id:string,"
    "event_time:bigint,event_ids:array<string>,evidence:string>>"
)


def key_text(parts: Sequence[Column]) -> Column:
    """The rule's key parts as one string (`with_alert_ids` splits it back)."""
    return F.concat_ws(KEY_SEP, *parts)


def capped(ids: Column) -> Column:
    """At most `MAX_EVENT_IDS` ids: the first and last half (`detectors.alert.cap_ids`)."""
    half = MAX_EVENT_IDS // 2
    return F.when(F.size(ids) <= MAX_EVENT_IDS, ids).otherwise(
        F.concat(F.slice(ids, 1, half), F.slice(ids, -half, half))
    )


def params_columns(params: Mapping[str, Any]) -> list[Column]:
    """A rule's parameters (`model_dump()`) as evidence columns, nulls kept as nulls."""
    return [
        (F.lit(value) if value is not None else F.lit(None).cast("string")).alias(name)
        for name, value in params.items()
    ]


def evidence_json(fields: Sequence[Column]) -> Column:
    """The evidence as a JSON object string, null fields kept (as `Alert.to_row` has them)."""
    return F.to_json(F.struct(*fields), {"ignoreNullFields": "false"})


def alert(
    rule: str,
    label: str | None,
    entity: Column,
    event_time: Column,
    event_ids: Column,
    evidence: Column,
    key: Sequence[Column],
) -> Column:
    """One alert struct with `FIELDS` (the key text in `alert_id`)."""
    return F.struct(
        key_text([F.lit(rule), entity, *key]).alias("alert_id"),
        F.lit(rule).alias("rule"),
        F.lit(label).cast("string").alias("label"),
        entity.cast("string").alias("entity_id"),
        event_time.cast("long").alias("event_time"),
        capped(event_ids).alias("event_ids"),
        evidence.alias("evidence"),
    )


def with_alert_ids(rows: pd.DataFrame) -> pd.DataFrame:
    """Alert rows whose `alert_id` holds the key text, with the real id instead.

    >>> row = pd.DataFrame({"alert_id": [KEY_SEP.join(["step", "s1", "t", "a", "b"])]})
    >>> with_alert_ids(row)["alert_id"].tolist() == [alert_id_for("step", "s1", ["t", "a", "b"])]
    True
    """
    if rows.empty:
        return rows
    ids = [_id(str(text)) for text in rows["alert_id"]]
    return rows.assign(alert_id=ids)


def _id(text: str) -> str:
    rule, entity, *key = text.split(KEY_SEP)
    return alert_id_for(rule, entity, key)
