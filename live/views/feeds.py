"""What the read API shows of the topics, as pure in-memory views (no Kafka): the projections
of one record (`activity_row`, `alert_row`, `progress_row`), the ring buffers of recent rows,
the pipeline progress per query and the records/s per topic. The threads that fill them are
`live.consumers.feeds`.

What leaves here is projected field by field: an activity row carries the card token and last 4
digits, never more of the card (the topic has no PAN either; the projection makes sure nothing
else added to the record later reaches the UI by accident).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import orjson

from core.contracts import ALERT, topics
from core.contracts.events import PIPELINE_PROGRESS

ALERTS_TOPIC = topics.ALERTS.name
METRICS_TOPIC = topics.METRICS.name
PROGRESS_SCHEMA = PIPELINE_PROGRESS

#: The `cards.activity` fields the UI may see.
ACTIVITY_FIELDS = (
    "transaction_id",
    "card_token",
    "card_last4",
    "event_time",
    "decided_at",
    "amount",
    "currency",
    "merchant_id",
    "channel",
    "country",
    "lat",
    "lon",
    "decision",
    "score",
    "reasons",
    "evidence",
)
#: The alerts-topic fields the UI sees: all of them (`late` and `late_by_ms` are the shipping
#: job's: raised on data that landed late, and by how much).
ALERT_FIELDS = ALERT.names
PROGRESS_FIELDS = (
    "job",
    "mode",
    "query",
    "batch_id",
    "input_rows",
    "input_rows_per_s",
    "processed_rows_per_s",
    "watermark",
    "dropped_by_watermark",
    "late_events",
    "duration_ms",
    "newest_event_ms",
    "offsets_behind",
    "at",
)


# -- parsing: pure functions of one record ----------------------------------------------------


def activity_row(record: Any) -> dict[str, Any] | None:
    """The UI's view of a `cards.activity` record; None if it is not one."""
    if not isinstance(record, dict) or not isinstance(record.get("card_token"), str):
        return None
    last4 = record.get("card_last4")
    if not isinstance(last4, str) or len(last4) != 4 or "decision" not in record:
        return None
    return {key: record.get(key) for key in ACTIVITY_FIELDS}


def alert_row(record: Any) -> dict[str, Any] | None:
    """An Alert row, `evidence` decoded from its JSON string; None if it is not one."""
    if not isinstance(record, dict) or not record.get("alert_id") or not record.get("rule"):
        return None
    row = {key: record.get(key) for key in ALERT_FIELDS}
    evidence = row["evidence"]
    if isinstance(evidence, str | bytes):
        try:
            row["evidence"] = orjson.loads(evidence)
        except orjson.JSONDecodeError:
            row["evidence"] = {"raw": evidence if isinstance(evidence, str) else evidence.decode()}
    return row


def progress_row(record: Any) -> dict[str, Any] | None:
    if not isinstance(record, dict) or record.get("schema") != PROGRESS_SCHEMA:
        return None
    if not record.get("query"):
        return None
    return {key: record.get(key) for key in PROGRESS_FIELDS}


def parse_watermark(value: Any) -> int | None:
    """Spark's watermark (ISO 8601, e.g. `2026-01-01T00:10:00.000Z`) as epoch ms."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


# -- the in-memory views ---------------------------------------------------------------------


class _Raw:
    """A record kept as it came (bytes) until a reader asks for it, then parsed once."""

    __slots__ = ("row", "value")

    def __init__(self, value: bytes) -> None:
        self.value: bytes | None = value
        self.row: dict[str, Any] | None = None


class RingBuffer:
    """The newest `size` rows; `recent(limit)` newest first by `key`, deduplicated by `id_key`
    (a replayed alert or decision shows once, its latest copy).

    With `parse`, `append_raw(value)` keeps a record's bytes and `parse` turns them into its
    row (None: not one) only when `recent` is called: a topic written thousands of times a
    second costs the tail a deque append per record, not a JSON parse, and only the `size`
    newest are ever parsed, once each."""

    def __init__(
        self,
        size: int,
        key: str,
        id_key: str,
        parse: Callable[[bytes], dict[str, Any] | None] | None = None,
    ) -> None:
        self.size = size
        self.key = key
        self.id_key = id_key
        self.parse = parse
        self._rows: deque[dict[str, Any] | _Raw] = deque(maxlen=size)
        self._lock = threading.Lock()
        self.seen = 0

    def append(self, row: dict[str, Any]) -> None:
        with self._lock:
            self._rows.append(row)
            self.seen += 1

    def append_raw(self, value: bytes) -> None:
        if self.parse is None:
            raise TypeError("append_raw needs a RingBuffer with parse")
        with self._lock:
            self._rows.append(_Raw(value))
            self.seen += 1

    def __len__(self) -> int:
        with self._lock:
            return len(self._rows)

    def recent(self, limit: int) -> list[dict[str, Any]]:
        with self._lock:  # held while parsing: each raw record is parsed exactly once
            rows = [row for row in map(self._resolve, self._rows) if row is not None]
        latest: dict[Any, dict[str, Any]] = {}
        for row in rows:  # oldest first: a later copy replaces an earlier one
            latest[row.get(self.id_key)] = row
        ordered = sorted(latest.values(), key=lambda r: _number(r.get(self.key)), reverse=True)
        return ordered[: max(0, limit)]

    def _resolve(self, entry: dict[str, Any] | _Raw) -> dict[str, Any] | None:
        if not isinstance(entry, _Raw):
            return entry
        if entry.value is not None and self.parse is not None:
            entry.row, entry.value = self.parse(entry.value), None
        return entry.row


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else float("-inf")


def _whole(value: Any) -> int | None:
    """A report's count or epoch ms; None if it has none (or not a number)."""
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class PipelineProgress:
    """The latest `pipeline.progress/1` report per query, plus totals over the reports seen."""

    def __init__(self) -> None:
        self._latest: dict[str, dict[str, Any]] = {}
        self._totals: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    def add(self, row: dict[str, Any]) -> None:
        query = str(row["query"])
        with self._lock:
            totals = self._totals.setdefault(
                query,
                {
                    "batches_seen": 0,
                    "input_rows_seen": 0,
                    "dropped_by_watermark_seen": 0,
                    "late_events_seen": 0,
                },
            )
            totals["batches_seen"] += 1
            totals["input_rows_seen"] += int(row.get("input_rows") or 0)
            totals["dropped_by_watermark_seen"] += int(row.get("dropped_by_watermark") or 0)
            late = row.get("late_events")  # reports before late_events: the operators' sum
            if late is None:
                late = row.get("dropped_by_watermark")
            totals["late_events_seen"] += int(late or 0)
            current = self._latest.get(query)
            if current is None or _number(row.get("at")) >= _number(current.get("at")):
                self._latest[query] = row

    def queries(self, now_ms: int) -> list[dict[str, Any]]:
        """Per query: the latest report, the watermark as epoch ms, how far it trails the
        newest event the batch read (`watermark_behind_newest_s`, both on the stream's own
        clock, simulated or not) and the report's wall-clock time (`watermark_delay_s`), the
        report's age, and the totals."""
        with self._lock:
            items = [(q, dict(r), dict(self._totals[q])) for q, r in self._latest.items()]
        out = []
        for query, row, totals in sorted(items):
            watermark_ms = parse_watermark(row.get("watermark"))
            at = row.get("at")
            at_ms = int(at) if isinstance(at, int | float) else None
            newest_ms = _whole(row.get("newest_event_ms"))
            out.append(
                {
                    **row,
                    "query": query,
                    "watermark_ms": watermark_ms,
                    "watermark_delay_s": None
                    if watermark_ms is None or at_ms is None
                    else round((at_ms - watermark_ms) / 1000, 3),
                    "newest_event_ms": newest_ms,
                    "offsets_behind": _whole(row.get("offsets_behind")),
                    "watermark_behind_newest_s": None
                    if watermark_ms is None or newest_ms is None
                    else round((newest_ms - watermark_ms) / 1000, 3),
                    "report_age_s": None if at_ms is None else round((now_ms - at_ms) / 1000, 3),
                    **totals,
                }
            )
        return out


#: A job's figures that are the largest of its queries' (None: no query reports one).
LARGEST = ("watermark_delay_s", "watermark_behind_newest_s", "offsets_behind")


def job_summaries(queries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per job (from `queries()`): its queries, rows/s summed, the largest watermark delay,
    watermark behind the newest event and records behind the topics' end, and late input rows
    counted once: a job's queries read the same input with the same watermark, so the most any
    of its queries dropped (`late_events_seen`), not their sum."""
    jobs: dict[str, dict[str, Any]] = {}
    for q in queries:
        job = str(q.get("job") or q["query"])
        summary = jobs.setdefault(
            job,
            {
                "job": job,
                "queries": 0,
                "modes": [],
                "input_rows_per_s": 0.0,
                "processed_rows_per_s": 0.0,
                **dict.fromkeys(LARGEST),
                "late_events_seen": 0,
            },
        )
        summary["queries"] += 1
        if q.get("mode") and q["mode"] not in summary["modes"]:
            summary["modes"].append(q["mode"])
        summary["input_rows_per_s"] += float(q.get("input_rows_per_s") or 0.0)
        summary["processed_rows_per_s"] += float(q.get("processed_rows_per_s") or 0.0)
        for key in LARGEST:
            value, known = q.get(key), summary[key]
            if value is not None:
                summary[key] = value if known is None else max(known, value)
        summary["late_events_seen"] = max(summary["late_events_seen"], q["late_events_seen"])
    return [jobs[name] for name in sorted(jobs)]


class RateTracker:
    """Records/s per topic from successive end-offset totals.

    `add(at_s, ends)` takes a sample (monotonic seconds, topic -> sum of partition end offsets);
    a topic's rate is the delta over the last two samples that both saw it. A total that went
    down (the topic was deleted and created again) counts as a fresh start, not a negative rate.
    """

    def __init__(self, history: int = 120) -> None:
        self._samples: deque[tuple[float, float, dict[str, int]]] = deque(maxlen=history + 1)
        self._lock = threading.Lock()

    def add(self, at_s: float, ends: Mapping[str, int], wall_ms: int | None = None) -> None:
        wall = time.time_ns() // 1_000_000 if wall_ms is None else wall_ms
        with self._lock:
            self._samples.append((at_s, float(wall), dict(ends)))

    @staticmethod
    def _between(
        a: tuple[float, float, dict[str, int]], b: tuple[float, float, dict[str, int]]
    ) -> dict[str, float]:
        dt = b[0] - a[0]
        if dt <= 0:
            return {}
        out = {}
        for topic, end in b[2].items():
            before = a[2].get(topic)
            if before is None:
                continue
            out[topic] = round(max(0, end - before) / dt, 3)
        return out

    def rates(self) -> dict[str, float]:
        with self._lock:
            samples = list(self._samples)
        return self._between(samples[-2], samples[-1]) if len(samples) >= 2 else {}

    def ends(self) -> dict[str, int]:
        with self._lock:
            return dict(self._samples[-1][2]) if self._samples else {}

    def sampled_at(self) -> int | None:
        with self._lock:
            return int(self._samples[-1][1]) if self._samples else None

    def history(self) -> list[dict[str, Any]]:
        """Oldest first: `{"at": epoch ms, "rates": {topic: records/s}}` per sample pair."""
        with self._lock:
            samples = list(self._samples)
        return [
            {"at": int(b[1]), "rates": self._between(a, b)} for a, b in itertools.pairwise(samples)
        ]
