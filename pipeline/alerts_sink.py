"""The alerts sink (`foreachBatch`): each new alert once to Kafka and once to the Parquet lake.

Per micro-batch, the alert rows (`ALERT_COLUMNS`) are collected on the driver (alerts are
few) and

1. alerts whose id is already in the lake are left out: a replayed batch, or the same input
   re-run with a fresh checkpoint, reproduces the same deterministic ids and adds nothing;
2. the rest go to the alerts topic, keyed by `entity_id`, as JSON objects with the evidence as
   an object plus `source: "pipeline"`, `job` and `detected_at` (processing time, epoch ms);
3. then to `<lake>/alerts/<job>/<query id>/batch-<batch id>.parquet` (written to a temporary
   name, then renamed). A batch whose file exists was fully written to both sinks, so a
   replay skips it. Kafka goes first: a crash between the two sinks re-publishes the same
   ids on replay (at least once, idempotent by id) instead of losing them.

An unwritable lake (disk full, read-only, a file where a folder should be) holds the batch:
it says so once on stderr (path and OS error), retries every `LAKE_RETRY_S`, and says when
the file is written. Failing the batch instead would make Spark fail the query, and its
replay would publish the batch's alerts to Kafka a second time. After `LAKE_WAIT_S` it fails.

The query id comes from the checkpoint's `metadata` file, so a restart from the checkpoint
keeps writing to the same folder and a fresh checkpoint starts a new one.

A second sink can stand behind a first one (`vehicles`'s late rescoring): with
`also_known=first.known_ids` it leaves out the ids the first one wrote, `extra` adds fields to
its records (`late: true`), `folder` names its own lake folder, and `wait_for` is called with
the latest event time of its new alerts before it decides (to let the first one judge them).
`carry` names batch columns copied into each record beside the alert's (`shipping`'s per-alert
`late` and `late_by_ms`), and `split` sees the collected rows first and returns the alert rows
(`shipping` takes its late-drop counts out of the same rows: a stateful batch is computed once).
"""

from __future__ import annotations

import errno
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from confluent_kafka import KafkaError, Message, Producer
from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery

from core.config import StackConfig
from core.contracts import ALERT_LAKE
from core.kafka import producer_config
from detectors import ALERT_COLUMNS

SOURCE = "pipeline"
#: How long a batch waits for an unwritable lake before it fails (and with it the query).
LAKE_WAIT_S = 600.0
#: Seconds between two attempts to write a batch's file to an unwritable lake.
LAKE_RETRY_S = 1.0

#: A lake file's columns: the alert's, where from, and the batch that wrote it.
LAKE_SCHEMA = ALERT_LAKE.arrow_schema()

_SINKS: dict[str, AlertSink] = {}  # checkpoint path -> sink, for `sink_of`


def alert_record(row: dict[str, Any], job: str, detected_at: int) -> dict[str, Any]:
    """The alerts-topic value of one alert row (evidence parsed back into an object).

    >>> row = {"alert_id": "a1", "rule": "velocity", "label": "card_testing",
    ...     "entity_id": "c1", "event_time": 5, "event_ids": ["t1"], "evidence": '{"n": 5}'}
    >>> alert_record(row, "cards", 9)["evidence"], alert_record(row, "j", 9)["source"]
    ({'n': 5}, 'pipeline')
    """
    return {
        "alert_id": str(row["alert_id"]),
        "rule": str(row["rule"]),
        "label": None if row["label"] is None else str(row["label"]),
        "entity_id": str(row["entity_id"]),
        "event_time": int(row["event_time"]),
        "event_ids": [str(i) for i in row["event_ids"]],
        "evidence": json.loads(row["evidence"]),
        "source": SOURCE,
        "job": job,
        "detected_at": int(detected_at),
    }


def new_alerts(rows: pd.DataFrame, known: set[str]) -> pd.DataFrame:
    """Rows whose alert id is not known yet, one per id, in (event_time, alert_id) order.

    >>> rows = pd.DataFrame({"alert_id": ["b", "a", "b", "c"], "event_time": [2, 1, 2, 3]})
    >>> new_alerts(rows, {"c"})["alert_id"].tolist()
    ['a', 'b']
    """
    fresh = rows.loc[~rows["alert_id"].isin(known)].drop_duplicates("alert_id")
    return fresh.sort_values(["event_time", "alert_id"], kind="stable").reset_index(drop=True)


def lake_alert_ids(folder: Path) -> set[str]:
    """Every alert id in the Parquet files under `folder` (none when it does not exist)."""
    files = sorted(str(p) for p in folder.rglob("*.parquet")) if folder.is_dir() else []
    if not files:
        return set()
    table = ds.dataset(files, format="parquet").to_table(columns=["alert_id"])
    return {str(v) for v in table.column("alert_id").to_pylist()}


def read_lake(lake: Path, job: str | None = None) -> pd.DataFrame:
    """All alerts in the lake (of one job), as a DataFrame with the lake's columns."""
    folder = lake / "alerts" if job is None else lake / "alerts" / job
    files = sorted(str(p) for p in folder.rglob("*.parquet")) if folder.is_dir() else []
    if not files:
        return LAKE_SCHEMA.empty_table().to_pandas()
    return ds.dataset(files, format="parquet", schema=LAKE_SCHEMA).to_table().to_pandas()


def checkpoint_query_id(checkpoint: Path) -> str:
    """The query id Spark keeps in `<checkpoint>/metadata` (one JSON line)."""
    with (checkpoint / "metadata").open(encoding="utf-8") as handle:
        return str(json.loads(handle.readline())["id"])


class AlertSink:
    """`foreachBatch` callable; see the module docstring. Counts what it did in `stats()`."""

    def __init__(
        self,
        stack: StackConfig,
        topic: str,
        job: str,
        checkpoint: Path,
        lake: Path,
        *,
        folder: str | None = None,
        extra: Mapping[str, Any] | None = None,
        also_known: Callable[[], set[str]] | None = None,
        wait_for: Callable[[int], None] | None = None,
        carry: Sequence[str] = (),
        split: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
    ) -> None:
        self.stack, self.topic, self.job = stack, topic, job
        self.carry, self.split = tuple(carry), split
        self.checkpoint = checkpoint
        self.folder = lake / "alerts" / (folder or job)
        self.extra = dict(extra or {})
        self.also_known = also_known
        self.wait_for = wait_for
        self._known: set[str] | None = None
        self._producer: Producer | None = None
        self._lock = threading.Lock()
        self.batches = 0
        self.alerts_seen = 0
        self.alerts_written = 0
        self.alerts_known = 0
        self.batches_replayed = 0
        self.seen_ids: set[str] = set()
        _SINKS[str(checkpoint)] = self

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        query_id = checkpoint_query_id(self.checkpoint)
        target = self.folder / query_id / f"batch-{batch_id:09d}.parquet"
        # Always run the whole batch: its stateful operators commit their state only then.
        rows = cast(pd.DataFrame, batch.select(*ALERT_COLUMNS, *self.carry).toPandas())
        if self.split is not None:
            rows = self.split(rows)
        with self._lock:
            self.batches += 1
            if target.exists():
                self.batches_replayed += 1
                return
            if rows.empty:
                return
            if self._known is None:
                self._known = lake_alert_ids(self.folder)
            self.alerts_seen += len(rows)
            self.seen_ids.update(str(i) for i in rows["alert_id"])
            if self.wait_for is not None:
                self.wait_for(int(rows["event_time"].max()))
            known = self._known if self.also_known is None else self._known | self.also_known()
            fresh = new_alerts(rows, known)
            self.alerts_known += rows["alert_id"].nunique() - len(fresh)
            if fresh.empty:
                return
            detected_at = int(time.time() * 1000)
            records = [
                {
                    **alert_record(r, self.job, detected_at),
                    **self.extra,
                    **{c: _plain(r[c]) for c in self.carry if c in r},
                }
                for r in fresh.to_dict("records")
            ]
            self._publish(records)
            self._write_lake(target, records, query_id, batch_id)
            self._known.update(r["alert_id"] for r in records)
            self.alerts_written += len(records)

    def _publish(self, records: Iterable[dict[str, Any]]) -> None:
        if self._producer is None:
            self._producer = Producer(producer_config(self.stack, **{"client.id": self.job}))
        errors: list[KafkaError] = []

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                errors.append(err)

        for record in records:
            value = json.dumps(record, sort_keys=True, allow_nan=False).encode()
            self._producer.produce(
                self.topic, value, record["entity_id"].encode(), on_delivery=delivered
            )
        left = self._producer.flush(60)
        if left or errors:
            raise RuntimeError(f"alerts to {self.topic}: {left} undelivered, errors: {errors[:3]}")

    def _write_lake(
        self, target: Path, records: list[dict[str, Any]], query_id: str, batch_id: int
    ) -> None:
        rows = [
            {
                **{k: v for k, v in record.items() if k in LAKE_SCHEMA.names},
                "evidence": json.dumps(record["evidence"], sort_keys=True),
                "query_id": query_id,
                "batch_id": batch_id,
            }
            for record in records
        ]
        table = pa.Table.from_pylist(rows, schema=LAKE_SCHEMA)
        blocked_at: float | None = None
        while True:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_name(f".{target.name}.partial")
                pq.write_table(table, partial)
                os.replace(partial, target)
            except OSError as exc:
                now = time.monotonic()
                if blocked_at is None:
                    blocked_at = now
                    _say(
                        f"{self.job}: alerts lake unwritable: {lake_error(exc, target)}; "
                        f"batch {batch_id} holds its {len(rows)} alerts and retries every "
                        f"{LAKE_RETRY_S:g}s for up to {LAKE_WAIT_S:g}s"
                    )
                elif now - blocked_at >= LAKE_WAIT_S:
                    raise OSError(
                        exc.errno, f"alerts lake unwritable for {LAKE_WAIT_S:g}s: {exc}"
                    ) from exc
                time.sleep(LAKE_RETRY_S)
                continue
            if blocked_at is not None:
                _say(
                    f"{self.job}: alerts lake writable again after "
                    f"{time.monotonic() - blocked_at:.1f}s: batch {batch_id} written to {target}"
                )
            return

    def known_ids(self) -> set[str]:
        """The alert ids this sink has written (its lake folder's, then its own writes)."""
        with self._lock:
            if self._known is None:
                self._known = lake_alert_ids(self.folder)
            return set(self._known)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "batches": self.batches,
                "alerts_seen": self.alerts_seen,
                "alerts_written": self.alerts_written,
                "alerts_known": self.alerts_known,
                "batches_replayed": self.batches_replayed,
            }

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(30)
            self._producer = None


def lake_error(exc: OSError, target: Path) -> str:
    """The path and OS error of a failed lake write, on one line.

    >>> lake_error(NotADirectoryError(20, "Not a directory"), Path("/l/a/b.parquet"))
    '/l/a/b.parquet: ENOTDIR (Not a directory)'
    """
    code = errno.errorcode.get(exc.errno or 0, "error")
    return f"{exc.filename or target}: {code} ({exc.strerror or exc})"


def _say(line: str) -> None:
    """One line on stderr, where `pipeline run`'s log is (not in Spark's log file)."""
    print(line, file=sys.stderr, flush=True)


def _plain(value: Any) -> Any:
    """A pandas cell as a JSON value (numpy scalars as Python ones, NaN as null)."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    return value.item() if hasattr(value, "item") else value


def sink_of(query: StreamingQuery) -> AlertSink | None:
    """The AlertSink writing a running query's batches (matched by checkpoint), else None."""
    for sink in reversed(list(_SINKS.values())):
        try:
            if checkpoint_query_id(sink.checkpoint) == str(query.id):
                return sink
        except OSError:
            continue
    return None
