"""The alert record, declared once, in its three forms:

- `ALERT_ROW`: one row of an alert DataFrame, as every rule reports it (`detectors.Alert`,
  `detectors.ALERT_COLUMNS`, the Spark DDL `detectors.ALERT_SPARK_DDL` of `applyInPandas` and
  `transformWithStateInPandas`); `evidence` is its JSON text there.
- `ALERT`: the record on the `alerts` topic (`pipeline.alerts_sink.alert_record`, the panel's
  `AlertRow`): the row with `evidence` as an object, plus who raised it and when. `late` and
  `late_by_ms` are written by some jobs only (shipping; vehicles's late rescoring).
- `ALERT_LAKE`: the record in the Parquet lake (`pipeline.alerts_sink.LAKE_SCHEMA`): the
  topic's record less `late` / `late_by_ms`, `evidence` as JSON text, plus the query and batch
  that wrote it.
"""

from __future__ import annotations

from core.contracts import topics
from core.contracts.events import Field, Record

_ROW = (
    Field(
        "alert_id",
        "string",
        doc="A hash of rule, entity and the rule's key: a replay reproduces the same id.",
    ),
    Field("rule", "string", doc="The rule that fired (snake_case, e.g. impossible_travel)."),
    Field("label", "string", nullable=True, doc="The label type it targets, or null."),
    Field("entity_id", "string", doc="Card token, vehicle or container id."),
    Field("event_time", "int", doc="Device clock of the event that fired it."),
    Field("event_ids", "strings", doc="The events involved, in event-time order (at most 64)."),
    Field("evidence", "object", doc="The values that crossed thresholds."),
)
_SINK = (
    Field("source", "string", doc="What raised it: `pipeline`."),
    Field("job", "string", doc="The Spark job that raised it."),
    Field("detected_at", "int", doc="Processing time, epoch ms."),
)

ALERT_ROW = Record(
    "alert.row",
    _ROW,
    "One decision of one rule about one entity, as a row of an alert DataFrame.",
)
ALERT = Record(
    "alert",
    (
        *_ROW,
        *_SINK,
        Field(
            "late",
            "bool",
            nullable=True,
            optional=True,
            doc="Raised on data that landed late (shipping).",
        ),
        Field("late_by_ms", "int", nullable=True, optional=True, doc="How late, for a late alert."),
    ),
    "An alert on the alerts topic: the rule's row, where it came from and when it was detected.",
    topics.ALERTS,
)
ALERT_LAKE = Record(
    "alert.lake",
    (
        *_ROW,
        *_SINK,
        Field("query_id", "string", doc="The streaming query that wrote it."),
        Field("batch_id", "int", doc="The micro-batch that wrote it."),
    ),
    "An alert in the Parquet lake: the topic's record and the batch that wrote it.",
)
