"""What the panel says is down: Kafka, or the Spark job a page is fed by."""

from __future__ import annotations

from ui.status import JOB_DOWN, KAFKA_DOWN, down_notes

UP = {"kafka": {"connected": True, "bootstrap": "b:9092", "error": None}}
DOWN = {"kafka": {"connected": False, "bootstrap": "b:9092", "error": "Connection refused"}}


def test_kafka_down_names_the_broker_and_the_command() -> None:
    (note,) = down_notes(DOWN, {"queries": []})
    assert KAFKA_DOWN in note and "`b:9092`" in note and "Connection refused" in note
    assert "`streamsim kafka up`" in note
    assert JOB_DOWN not in note  # the job cannot report without Kafka: one cause, said once


def test_no_job_reporting_on_a_page_fed_by_one() -> None:
    (note,) = down_notes(UP, {"queries": []})
    assert JOB_DOWN in note and "`streamsim pipeline run JOB`" in note


def test_a_job_whose_last_report_is_old_is_down() -> None:
    (note,) = down_notes(UP, {"queries": [{"query": "q", "report_age_s": 3600.0}]})
    assert JOB_DOWN in note


def test_nothing_when_all_is_up_or_the_page_needs_no_job() -> None:
    assert down_notes(UP, {"queries": [{"query": "q", "report_age_s": 2.0}]}) == []
    assert down_notes(UP, None) == []
