"""The shipping detections that `streamsim evaluate shipping` scores: the rules of
`detectors.shipping`, in their batch form, over a run's three topics read to their end.

Why to the end and not up to a time: a voyage's readings are held on board and land days late,
in bulk, when the ship's link comes up in port, so any cut-off in time would drop whole
voyages. The rules see each history whole (deduplicated by event id: a retried event is one
reading), as the job's backfill path re-scores a flushed voyage when it lands.

When an alert could have been raised (`detected_sim_ms`, simulated clock): the latest of the
alert's own event time and the arrival (emit time, from truth) of the events it names; for a
box lost overboard, whose evidence is its ship's positions going on after the box fell silent,
also the arrival of the ship's first position of its own log (`ship_log`: not the satellite
slice) at or after that moment. It is the earliest a
streaming job that processes each record the moment it lands could alert.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson
import pandas as pd

from core.config import StackConfig
from core.contracts import topics
from core.kafka.reader import topic_values
from detectors.alert import Alert
from detectors.shipping import (
    CONTAINER_COLUMNS,
    PORT_EVENT_COLUMNS,
    POSITION_COLUMNS,
    door_tamper,
    lost_overboard,
    missed_unload,
    reefer_failure,
    route_deviation,
    ship_log,
)

#: The topics the rules read, with the columns each rule needs (so an empty topic still
#: yields a frame the rules accept).
TOPIC_COLUMNS: dict[str, tuple[str, ...]] = {
    topics.SHIPPING_CONTAINERS.name: CONTAINER_COLUMNS,
    topics.SHIPPING_POSITIONS.name: POSITION_COLUMNS,
    topics.SHIPPING_PORT_EVENTS.name: PORT_EVENT_COLUMNS,
}
#: Incidents still running at the run's end (last reading within `RUNNING_MS` of it: loggers
#: report every 10-60 min) that began less than `HORIZON_MS` before it are open, not scored
#: (`scoring.open_incidents`): a ship sailing off its lane at 12 kn may take ~11 h to reach
#: the point where it loiters, and the rule needs an hour of that.
HORIZON_MS = 12 * 3_600_000
RUNNING_MS = 3_600_000
DETECTION_COLUMNS = ("alert_id", "rule", "label", "entity_id", "event_ids", "detected_sim_ms")


#: The truth fields scoring needs (`scoring`, and `emit_time` for when an alert could be raised).
TRUTH_COLUMNS = (
    "event_id", "true_time", "emit_time", "label", "incident_id", "dropped", "duplicate_of",
    "hard_negative",
)  # fmt: skip
#: Records turned into a frame at a time: a run of weeks holds millions of events, and a
#: million JSON objects as dicts take ~2.5 GB, their columns as a frame a small part of it.
CHUNK = 100_000


def read_run(
    stack: StackConfig, prefix: str, since: Mapping[str, Mapping[int, int]] | None = None
) -> dict[str, pd.DataFrame]:
    """The run's events (ids starting with `prefix`) of each shipping topic, read to its end
    offsets now, each event once."""
    since = since or {}
    return {
        topic: read_frame(stack, topic, columns, prefix, since.get(topic)).drop_duplicates(
            "event_id", ignore_index=True
        )
        for topic, columns in TOPIC_COLUMNS.items()
    }


def read_truth(
    stack: StackConfig, topic: str, prefix: str, since: Mapping[int, int] | None = None
) -> pd.DataFrame:
    """The run's truth records, the columns scoring needs only."""
    return read_frame(stack, topic, TRUTH_COLUMNS, prefix, since)


def read_frame(
    stack: StackConfig,
    topic: str,
    columns: tuple[str, ...],
    prefix: str,
    since: Mapping[int, int] | None = None,
) -> pd.DataFrame:
    """`columns` of the JSON records of `topic` whose event id starts with `prefix`, from the
    beginning (or `since`) to the end offsets now, built `CHUNK` records at a time; repeated
    strings (ids of ships, boxes, ports, labels) are kept once. Not JSON objects: skipped (the
    job dead-letters them; they are no reading of the run)."""
    chunks: list[pd.DataFrame] = []
    rows: list[tuple[Any, ...]] = []
    same: dict[Any, Any] = {}
    marker = prefix.encode()
    for values in topic_values(stack, topic, since):
        for value in values:
            if not value or marker not in value:
                continue  # another run's, or not a record at all
            try:
                record = orjson.loads(value)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(record, dict) or not str(record.get("event_id", "")).startswith(
                prefix
            ):
                continue
            rows.append(
                tuple(
                    same.setdefault(v, v) if isinstance(v, str) and c != "event_id" else v
                    for c in columns
                    for v in (record.get(c),)
                )
            )
        if len(rows) >= CHUNK:
            chunks.append(pd.DataFrame.from_records(rows, columns=list(columns)))
            rows = []
    chunks.append(pd.DataFrame.from_records(rows, columns=list(columns)))
    if len(chunks) == 1:
        return chunks[0]
    # column by column: a chunk's all-null column must not decide the dtype
    return pd.DataFrame(
        {
            c: pd.concat(
                [chunk[c].astype(object) for chunk in chunks], ignore_index=True
            ).infer_objects()
            for c in columns
        }
    )


def frame_of(records: list[dict[str, Any]], columns: tuple[str, ...]) -> pd.DataFrame:
    """Records as a frame with at least `columns`, one row per event id (the first copy).

    >>> frame_of([{"event_id": "a", "x": 1}, {"event_id": "a", "x": 1}], ("event_id", "y"))
      event_id  x     y
    0        a  1  None
    """
    frame = pd.DataFrame.from_records(records)
    for column in columns:
        if column not in frame.columns:
            frame[column] = None
    return frame.drop_duplicates("event_id", ignore_index=True)


def run_rules(
    containers: pd.DataFrame, positions: pd.DataFrame, port_events: pd.DataFrame
) -> list[Alert]:
    """Every shipping rule with its default parameters over the run's histories."""
    out = reefer_failure(containers) if not containers.empty else []
    if not containers.empty:
        out += door_tamper(containers)
        out += lost_overboard(containers, positions)
        out += missed_unload(containers, port_events)
    if not positions.empty:
        out += route_deviation(positions)
    return out


def detections(alerts: list[Alert], positions: pd.DataFrame, truth: pd.DataFrame) -> pd.DataFrame:
    """One row per alert (each id once) with when it could have been raised (see the module
    docstring); NaN where truth knows none of its events."""
    unique = list({a.alert_id: a for a in alerts}.values())
    emit = dict(zip(truth["event_id"], truth["emit_time"], strict=True))
    arrivals = _ship_arrivals(positions, emit)
    rows = []
    for a in unique:
        times = [emit[e] for e in a.event_ids if e in emit]
        at = float(max(max(times), a.event_time)) if times else np.nan
        if a.rule == "lost_overboard" and times:
            shown = _first_after(arrivals, str(a.evidence.get("ship_id")), a.event_time)
            at = np.nan if np.isnan(shown) else max(at, shown)
        rows.append(
            {
                "alert_id": a.alert_id,
                "rule": a.rule,
                "label": a.label,
                "entity_id": a.entity_id,
                "event_ids": list(a.event_ids),
                "detected_sim_ms": at,
            }
        )
    return pd.DataFrame(rows, columns=list(DETECTION_COLUMNS))


def _ship_arrivals(
    positions: pd.DataFrame, emit: Mapping[str, float]
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per ship: its positions' event times (sorted) and, for each, the earliest arrival of
    that position or any later one (a suffix minimum: a backlog lands in bulk)."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if positions.empty:
        return out
    logged = ship_log(positions)
    frame = logged.assign(emit=logged["event_id"].map(emit)).dropna(subset=["emit"])
    for ship, rows in frame.sort_values("event_time").groupby("ship_id", sort=False):
        t = rows["event_time"].to_numpy(np.float64)
        landed = np.minimum.accumulate(rows["emit"].to_numpy(np.float64)[::-1])[::-1]
        out[str(ship)] = (t, landed)
    return out


def _first_after(
    arrivals: Mapping[str, tuple[np.ndarray, np.ndarray]], ship: str, at: float
) -> float:
    """When the first position of `ship` at or after event time `at` arrived (NaN: never)."""
    if ship not in arrivals:
        return np.nan
    t, landed = arrivals[ship]
    i = int(np.searchsorted(t, at, side="left"))
    return float(landed[i]) if i < t.size else np.nan


def first_arrivals(truth: pd.DataFrame) -> pd.Series:
    """incident_id -> when its first delivered event arrived (emit time): with the detection
    time, the latency from the upload (a voyage's readings land in port, days after)."""
    sent = truth[truth["dropped"].isna() & truth["duplicate_of"].isna()]
    sent = sent[(sent["label"] != "none") & sent["incident_id"].notna()]
    return sent.groupby("incident_id")["emit_time"].min()


def batch_detections(
    stack: StackConfig,
    prefix: str,
    truth: pd.DataFrame,
    since: Mapping[str, Mapping[int, int]] | None = None,
) -> pd.DataFrame:
    """The shipping rules' detections over the run's topics (read to their end)."""
    frames = read_run(stack, prefix, since)
    alerts = run_rules(
        frames[topics.SHIPPING_CONTAINERS.name],
        frames[topics.SHIPPING_POSITIONS.name],
        frames[topics.SHIPPING_PORT_EVENTS.name],
    )
    return detections(alerts, frames[topics.SHIPPING_POSITIONS.name], truth)
