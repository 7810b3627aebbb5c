"""The alert contract for a foreign system: the checked-in page and JSON Schema are what
`core.contracts` generates, and the check `evaluate --alerts-*` applies agrees with that
schema, record by record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from core.contracts.foreign import REQUIRED, all_labels, check, json_schema, parse
from streamsim.contracts import page_markdown, schema_json

DOCS = Path(__file__).resolve().parents[2] / "docs"
OK = {
    "alert_id": "a1",
    "label": "spike",
    "entity_id": "s1",
    "event_time": 1_764_000_000_000,
    "event_ids": ["e1", "e2"],
    "detected_at": 1_764_000_001_000,
}
#: (record, the reason `check` gives, None for an alert in the contract)
CASES: list[tuple[Any, str | None]] = [
    (OK, None),
    ({k: OK[k] for k in REQUIRED}, None),  # the optional fields left out
    (OK | {"rule": None, "evidence": None, "late": None}, None),  # or null
    (OK | {"vendor_score": 0.9, "rule": "my_rule"}, None),  # unknown keys are ignored
    (OK | {"event_time": 1_764_000_000_000.0}, None),  # an integer written as a float
    (OK | {"event_ids": []}, None),  # typed right; scored as a false positive
    ({k: v for k, v in OK.items() if k != "entity_id"}, "missing_field:entity_id"),
    (OK | {"label": None}, "missing_field:label"),
    (OK | {"event_time": "2026-01-01T00:00:00Z"}, "wrong_type:event_time"),
    (OK | {"event_time": 1.5}, "wrong_type:event_time"),
    (OK | {"event_time": True}, "wrong_type:event_time"),
    (OK | {"event_ids": "e1"}, "wrong_type:event_ids"),
    (OK | {"event_ids": ["e1", 2]}, "wrong_type:event_ids"),
    (OK | {"entity_id": 7}, "wrong_type:entity_id"),
    (OK | {"detected_at": "now"}, "wrong_type:detected_at"),
    (OK | {"evidence": "[1]"}, "wrong_type:evidence"),
    (OK | {"late": "yes"}, "wrong_type:late"),
    (OK | {"label": "catch_all"}, "unknown_label"),
    ([OK], "not_an_object"),
    ("spike", "not_an_object"),
]


def test_the_page_and_schema_are_current() -> None:
    assert (DOCS / "contracts.md").read_text() == page_markdown() + "\n", (
        "docs/contracts.md is stale: run `streamsim contracts > docs/contracts.md`"
    )
    assert (DOCS / "contracts" / "alert.schema.json").read_text() == schema_json(), (
        "docs/contracts/alert.schema.json is stale: run `streamsim contracts --schema > "
        "docs/contracts/alert.schema.json`"
    )


def test_the_page_names_the_alert_topics_and_events() -> None:
    page = page_markdown()
    assert "| `event_ids` | array of strings | **yes** |" in page
    assert "| `detected_at` | integer | no |" in page
    assert "| `sensors.readings` | `sensor_id` | no |" in page
    assert "### `vehicle.telemetry/1` on `vehicles.telemetry` (key `vehicle_id`)" in page
    assert "| `sensors` | `stuck_sensor`, `spike`, `silent_device` |" in page
    assert "| `decision` | one of `approve`, `review`, `decline` |" in page


@pytest.mark.parametrize(("record", "reason"), CASES)
def test_check_gives_the_reason(record: Any, reason: str | None) -> None:
    assert check(record, ["spike", "stuck_sensor"]) == reason


@pytest.mark.parametrize(("record", "reason"), CASES)
def test_check_agrees_with_the_json_schema(record: Any, reason: str | None) -> None:
    """The schema knows every scenario's labels; `catch_all` is none of them."""
    validator = Draft202012Validator(json_schema())
    assert validator.is_valid(record) == (check(record, all_labels()) is None)
    assert validator.is_valid(record) == (reason is None)


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(json.loads(schema_json()))


def test_parse_counts_what_is_not_json() -> None:
    labels = ["spike"]
    assert parse(json.dumps(OK), labels) == (OK, None)
    assert parse(json.dumps(OK).encode(), labels) == (OK, None)
    assert parse(b'{"label": "spike", "entity_id"', labels) == (None, "bad_json")
    assert parse("not json", labels) == (None, "bad_json")
    assert parse(b"\xff\xfe", labels) == (None, "bad_json")
    assert parse(None, labels) == (None, "not_an_object")  # a tombstone
    assert parse(json.dumps(OK | {"label": "stuck_sensor"}), labels) == (None, "unknown_label")
