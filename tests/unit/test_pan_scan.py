"""The PAN scanner of tests/integration/test_pan_scan.py finds what is planted: a card number in
a Parquet file (plain, nested and dictionary-encoded columns), in a log line written with
separators, and in a Kafka record's key, headers and JSON value; and leaves alone what is not
one (timestamps, epoch milliseconds as numbers, card tokens)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.pan_scan import Scanner, log_files

SCAN = Scanner()

PAN = "4111111111111111"
MASKED = "************1111"
QUIET_LOG = (
    "[2026-11-24 07:19:30,123] INFO [Broker id=1] Leader cards.activity-0 epoch 1767225600001\n"
    "2026-11-24T07:19:30.123456Z api request tx-000123 tok_3f2a9c1b55e1 took 12 ms\n"
    "07:19:30.123 offset 4111111111111112 is not Luhn-valid\n"
    "%3|1795505136.015|FAIL|rdkafka#producer-2| [thrd:127.0.0.1:1/bootstrap]: refused\n"
)


def _parquet(path: Path, column: pa.Array) -> Path:
    pq.write_table(
        pa.table({"id": pa.array(["a-1", "a-2"]), "n": pa.array([1, 2]), "x": column}), path
    )
    return path


@pytest.mark.parametrize(
    "column",
    [
        pa.array(["tok_ab12", f"card {PAN} seen"]),
        pa.array([["x"], ["y", "4111 1111 1111 1111"]]),
        pa.array([{"entity_id": "tok_1", "evidence": "none"}, {"entity_id": PAN, "evidence": "-"}]),
        pa.array(["a", "4111.1111.1111.1111"]).dictionary_encode(),
        pa.array(
            [[("k", "v")], [("pan", "4111-1111-1111-1111")]], pa.map_(pa.string(), pa.string())
        ),
    ],
    ids=["string", "list", "struct", "dictionary", "map"],
)
def test_a_planted_pan_in_parquet_is_found(tmp_path: Path, column: pa.Array) -> None:
    hits, strings = SCAN.parquet(_parquet(tmp_path / "part-0.parquet", column))
    assert [h.masked for h in hits] == [MASKED]
    assert hits[0].where.endswith(":x") and strings >= 4


def test_a_clean_parquet_file_has_no_hit(tmp_path: Path) -> None:
    column = pa.array(["tok_3f2a9c1b", "cv-3f2a9c1b-1e240"])
    hits, strings = SCAN.parquet(_parquet(tmp_path / "part-0.parquet", column))
    assert hits == [] and strings == 4


@pytest.mark.parametrize(
    "line",
    [
        "2026-11-24 07:19:30,123 ERROR bad id 4111-1111-1111-1111 in {'loc': ['body']}",
        "[2026-11-24 07:19:30,123] WARN card 4111 1111 1111 1111 declined",
        "07:19:30.123 ref=4111.1111.1111.1111;",
        f"GET /v1/transactions/{PAN} 404",
    ],
)
def test_a_planted_pan_in_a_log_line_is_found(line: str, tmp_path: Path) -> None:
    hit = SCAN.text("x", line)
    assert hit is not None and hit.masked == MASKED
    log = tmp_path / "logs" / "api.log"
    log.parent.mkdir()
    log.write_text(QUIET_LOG + line + "\n")
    hits, lines = SCAN.log(log)
    assert [h.where for h in hits] == [f"{log}:5"] and lines == 5


def test_timestamps_and_numbers_in_logs_are_not_card_numbers(tmp_path: Path) -> None:
    log = tmp_path / "broker.log"
    log.write_text(QUIET_LOG)
    assert SCAN.log(log) == ([], 4)


def test_log_files_are_found_below_the_data_dir_but_not_under_skipped_dirs(
    tmp_path: Path,
) -> None:
    for name in ("logs/spark.log", "kafka/broker.log", "kafka/server.log.1", "x/run.err"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    segment = tmp_path / "kafka" / "data" / "alerts-0" / "00000000000000000000.log"
    segment.parent.mkdir(parents=True)
    segment.write_bytes(b"\x00")
    (tmp_path / "logs" / "notes.txt").write_text("")
    found = log_files(tmp_path, skip=(tmp_path / "kafka" / "data",))
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        "kafka/broker.log",
        "kafka/server.log.1",
        "logs/spark.log",
        "x/run.err",
    ]


@pytest.mark.parametrize(
    ("key", "value", "headers"),
    [
        (PAN.encode(), b"{}", None),
        (b"tok_1", orjson.dumps({"a": {"b": ["x", "4111-1111-1111-1111"]}}), None),
        (b"tok_1", orjson.dumps({PAN: 1}), None),
        (b"tok_1", b"not json: 4111 1111 1111 1111", None),
        (b"tok_1", b"{}", [("trace", PAN.encode())]),
    ],
    ids=["key", "nested-value", "dict-key", "not-json", "header"],
)
def test_a_planted_pan_in_a_record_is_found(
    key: bytes, value: bytes, headers: list[tuple[str, bytes]] | None
) -> None:
    hits = SCAN.record("t[0]@7", key, value, headers)
    assert [(h.where, h.masked) for h in hits] == [("t[0]@7", MASKED)]


def test_a_record_with_tokens_and_epoch_numbers_is_clean() -> None:
    value = {"card_token": "tok_3f2a9c1b", "event_time": 1767225600001, "last4": "1111"}
    assert SCAN.record("t[0]@0", b"tok_3f2a9c1b", orjson.dumps(value), None) == []


def test_an_alert_id_is_no_card_number_but_a_pan_glued_to_letters_is() -> None:
    # 16 hex digits (an alert id) whose digits pass Luhn: an id, as tokens and hashes are.
    assert SCAN.text("t[0]@0", orjson.dumps({"alert_id": "fd76745552895624"}).decode()) is None
    assert SCAN.text("t[0]@0", orjson.dumps({"id": "ab4111111111111111"}).decode()) is not None


def test_json_in_a_string_column_is_read_as_json(tmp_path: Path) -> None:
    """Evidence is a JSON string: its epoch numbers are not card numbers, its strings are."""
    clean = orjson.dumps({"window_end": 1767226920000, "window_start": 1767226320000}).decode()
    dirty = orjson.dumps({"window_end": 1767226920000, "note": "5555-5555-5555-4444"}).decode()
    hits, _ = SCAN.parquet(_parquet(tmp_path / "a.parquet", pa.array([clean, clean])))
    assert hits == []
    hits, _ = SCAN.parquet(_parquet(tmp_path / "b.parquet", pa.array([clean, dirty])))
    assert [h.masked for h in hits] == ["************4444"]
    assert "5555" not in hits[0].context and "************4444" in hits[0].context


def test_a_known_pan_is_found_as_a_number_too(tmp_path: Path) -> None:
    """The simulator's own PANs, given, are found in any digits: a JSON number, a number
    column, digits run into others."""
    scan = Scanner(known=["5555555555554444"])
    assert scan.record("t", b"k", orjson.dumps({"n": 5555555555554444}))[0].masked.endswith("4444")
    assert scan.text("x", "id=x5555-5555-5555-44447") is not None
    assert SCAN.record("t", b"k", orjson.dumps({"n": 5555555555554444})) == []  # numbers: known
    path = tmp_path / "n.parquet"
    pq.write_table(pa.table({"n": pa.array([1, 5555555555554444])}), path)
    assert len(scan.parquet(path)[0]) == 1 and SCAN.parquet(path)[0] == []


@pytest.mark.parametrize(
    "text",
    [
        "tok_0a4111111111111111bcdef0123456",  # a card token with a Luhn-valid digit run
        "profile-tok_0a4111111111111111bcdef0123456",
        "query 41111111-1111-1111-abcd-123456789abc started",
        "checkpoint 4111111111111111abcdabcdabcdabcd",
    ],
)
def test_hex_ids_are_not_card_numbers(text: str) -> None:
    from core.pan import find_pan

    assert find_pan(text) is not None  # what find_pan alone would report
    assert SCAN.text("x", text) is None


def test_a_pan_written_into_a_token_is_found_when_known() -> None:
    assert SCAN.text("x", "tok_4111111111111111") is None
    assert Scanner(known=[PAN]).text("x", "tok_4111111111111111") is not None


def test_an_epoch_number_column_is_not_a_card_number(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"event_time": pa.array([1767226326582, 1767226320000])}), path)
    assert Scanner(known=[PAN]).parquet(path) == ([], 0)
