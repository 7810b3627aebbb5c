"""A batch's report from Spark's progress JSON: the newest event time read and the records the
query is behind its topics' end (`pipeline.progress.BatchReport.from_progress`)."""

from __future__ import annotations

from typing import Any

from pipeline.progress import BatchReport


def spark_progress(**changes: Any) -> dict[str, Any]:
    """A StreamingQueryProgress as Spark 4 writes it (`progress.json`), trimmed."""
    progress: dict[str, Any] = {
        "id": "3f1c",
        "name": "vehicle-alerts",
        "timestamp": "2026-11-24T22:00:00.000Z",
        "batchId": 12,
        "numInputRows": 40,
        "inputRowsPerSecond": 20.0,
        "processedRowsPerSecond": 80.0,
        "durationMs": {"triggerExecution": 500},
        "eventTime": {
            "avg": "2026-03-03T08:00:45.000Z",
            "max": "2026-03-03T08:01:00.000Z",
            "min": "2026-03-03T08:00:30.000Z",
            "watermark": "2026-03-03T08:00:30.000Z",
        },
        "stateOperators": [],
        "sources": [
            {
                "description": "KafkaV2[Subscribe[vehicles.telemetry]]",
                "startOffset": '{"vehicles.telemetry":{"0":100,"1":200}}',
                "endOffset": '{"vehicles.telemetry":{"0":120,"1":220}}',
                "latestOffset": '{"vehicles.telemetry":{"0":150,"1":220}}',
                "numInputRows": 40,
            }
        ],
    }
    progress.update(changes)
    return progress


def test_newest_event_and_records_behind() -> None:
    report = BatchReport.from_progress(spark_progress())
    assert report.newest_event_ms == 1_772_524_860_000  # 2026-03-03T08:01:00Z
    assert report.watermark_ms is not None
    assert report.newest_event_ms - report.watermark_ms == 30_000  # on the simulated clock
    assert report.offsets_behind == 30  # partition 0: 150 - 120; partition 1 caught up
    assert report.to_dict()["offsets_behind"] == 30


def test_a_partition_ahead_of_latest_counts_zero_not_negative() -> None:
    source = {
        "endOffset": '{"t":{"0":10,"1":50}}',
        "latestOffset": '{"t":{"0":12,"1":40}}',  # a batch that read past the planned latest
    }
    assert BatchReport.from_progress(spark_progress(sources=[source])).offsets_behind == 2


def test_without_event_time_max_or_latest_offset_both_are_none() -> None:
    no_max = spark_progress(eventTime={"watermark": "2026-03-03T08:00:30.000Z"})
    no_latest = [{"endOffset": '{"t":{"0":10}}', "latestOffset": None}]
    report = BatchReport.from_progress({**no_max, "sources": no_latest})
    assert report.newest_event_ms is None and report.offsets_behind is None
    assert report.watermark_ms is not None  # the rest of the report is still read
    bare = BatchReport.from_progress({"id": "q", "batchId": 0})
    assert bare.newest_event_ms is None and bare.offsets_behind is None
