"""`bench api --generator wrk`: the bodies file the Lua script reads, and wrk's JSON line."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from core.errors import StreamsimError
from streamsim.bench.api import bench_payloads
from streamsim.bench.wrk import SCRIPT, parse, write_bodies


def test_bodies_have_one_id_slot_and_one_time_slot_and_are_json_once_filled(
    tmp_path: Path,
) -> None:
    path = write_bodies(tmp_path / "bodies.txt", bench_payloads(), count=200)
    lines = path.read_text().splitlines()
    assert len(lines) == 200
    for line in lines:
        assert line.count("@ID@") == 1 and line.count("@TS@") == 1
        body = orjson.loads(line.replace("@ID@", "wrk-x-1-7").replace("@TS@", "1700000000000"))
        assert body["transaction_id"] == "wrk-x-1-7" and body["event_time"] == 1700000000000
    assert SCRIPT.exists() and "WRK_JSON" in SCRIPT.read_text()


def test_wrk_output_is_parsed_from_its_json_line() -> None:
    out = (
        "Running 5s test @ http://127.0.0.1:1/v1/transactions\n  1 threads and 8 connections\n"
        'WRK_JSON {"requests":100,"duration_us":5000000,"connect":0,"read":0,"write":0,'
        '"status":3,"timeout":0,"p50_us":900,"p90_us":1500,"p99_us":4000,"max_us":9000}\n'
    )
    assert parse(out)["requests"] == 100 and parse(out)["p99_us"] == 4000
    with pytest.raises(StreamsimError, match="no WRK_JSON line"):
        parse("Running 5s test\n")
