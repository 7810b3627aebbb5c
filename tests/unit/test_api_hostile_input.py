"""Hostile input to the API: card numbers where they do not belong, loose types, missing
tokens, and what the control plane shows or writes. Each test closes one hole of issue 13."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml
from fastapi.testclient import TestClient
from uvicorn.logging import AccessFormatter

from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from api.logscrub import PanScrubFilter
from api.main import create_app
from core.config import ConfigError, StackConfig, load_stack
from core.config.stack import KAFKA_CLIENT_ENV
from core.pan import find_pan, scrub, scrub_text
from runs.manager import RunManager
from runs.run import RunSpec
from simulators.sinks.base import Records, Topics
from simulators.sinks.http import HttpEventSink
from simulators.sinks.memory import MemorySink

PAN = "4111111111111111"
OTHER_PAN = "5555555555554444"
TOKEN = "ctl-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
T0 = 1_767_225_600_000

#: A card number written out the ways a client might, none of them the request's own card.
WRITTEN = [
    "5555-5555-5555-4444",
    "5555.5555.5555.4444",
    "5555/5555/5555/4444",
    "5555:5555:5555:4444",
    "5555_5555_5555_4444",
    "5555--5555--5555--4444",
    "ref-5555555555554444",
    "2026-5555-5555-5555-4444",  # digits attached by a separator
    "x5555555555554444y",
]
#: Ids that must stay accepted (what the simulator and the load test send, and short numbers).
FINE_IDS = ["tx-000123", "cv-3f2a9c1b-1e240", "lt-abcdefgh-123456", "m-000042", "pos-7", "5411"]


def body(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "transaction_id": "tx-1",
        "card_number": PAN,
        "amount": 12.5,
        "currency": "GBP",
        "merchant_id": "m-1",
        "merchant_category": "5411",
        "channel": "card_present",
        "lat": 51.5074,
        "lon": -0.1278,
        "country": "GB",
        "event_time": T0,
        "terminal_id": "pos-1",
    }
    base.update(changes)
    return base


@pytest.fixture
def publisher() -> MemoryPublisher:
    return MemoryPublisher()


@pytest.fixture
def client(publisher: MemoryPublisher) -> Iterator[TestClient]:
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", TOKEN),
        publisher=publisher,
    )
    with TestClient(create_app(service)) as test_client:
        yield test_client


# Both ways in: the lane (exactly application/json) and FastAPI's own handler (any other
# content type), which must agree.
LANES = [{}, {"headers": {"content-type": "application/json; charset=utf-8"}}]


def post(client: TestClient, payload: Any, lane: dict[str, Any]) -> httpx.Response:
    headers = lane.get("headers", {"content-type": "application/json"})
    return client.post("/v1/transactions", content=orjson.dumps(payload), headers=headers)


# -- the detector ----------------------------------------------------------------------------


@pytest.mark.parametrize("text", WRITTEN)
def test_find_pan_sees_a_card_number_however_written(text: str) -> None:
    assert find_pan(text) is not None


@pytest.mark.parametrize("text", [*FINE_IDS, "1767225600001", "4111111111111112", "12-34"])
def test_find_pan_leaves_ids_and_non_luhn_numbers(text: str) -> None:
    assert find_pan(text) is None


def test_scrub_catches_glued_digits_separators_keys_and_numbers() -> None:
    for text in ("41111111111111112", "04111111111111111", "4111-1111-1111-1111-7"):
        assert "4111111111" not in scrub_text(f"card={text};"), text
    assert scrub_text("4111..1111..1111..1111").endswith("1111")
    assert "4111..1111" not in scrub_text("4111..1111..1111..1111")
    out = scrub({PAN: 1, "n": float(PAN), "big": 10**5000})
    assert PAN not in str(out) and "4111111111111111.0" not in str(out)


# -- request fields ----------------------------------------------------------------------------


@pytest.mark.parametrize("lane", LANES, ids=["lane", "fastapi"])
@pytest.mark.parametrize("field", ["transaction_id", "merchant_id", "terminal_id"])
def test_a_card_number_in_any_id_is_rejected(
    client: TestClient, publisher: MemoryPublisher, field: str, lane: dict[str, Any]
) -> None:
    for written in WRITTEN:
        response = post(client, body(**{field: written}), lane)
        assert response.status_code == 422, (field, written, response.text)
        (error,) = response.json()["detail"]
        assert error["loc"] == ["body", field]
        assert OTHER_PAN not in response.text and written not in response.text
        if "_" not in written:  # the id pattern admits the rest: the PAN check answers
            assert "card number" in error["msg"]
    assert publisher.records == []


@pytest.mark.parametrize("lane", LANES, ids=["lane", "fastapi"])
def test_a_card_number_as_merchant_category_name_is_rejected(
    client: TestClient, lane: dict[str, Any]
) -> None:
    response = post(client, body(merchant_category="shop 5555 5555 5555 4444"), lane)
    assert response.status_code == 422
    assert OTHER_PAN not in response.text and "5555 5555 5555 4444" not in response.text


@pytest.mark.parametrize("txid", FINE_IDS)
def test_ordinary_ids_are_accepted(client: TestClient, txid: str) -> None:
    response = post(client, body(transaction_id=txid, merchant_id=txid, terminal_id=txid), {})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("lane", LANES, ids=["lane", "fastapi"])
def test_an_unknown_key_holding_a_card_number_is_not_echoed_in_loc(
    client: TestClient, lane: dict[str, Any]
) -> None:
    payload = {**body(), PAN: 1, "5555-5555-5555-4444": "x"}
    response = post(client, payload, lane)
    assert response.status_code == 422
    locs = [e["loc"] for e in response.json()["detail"]]
    assert len(locs) == 2 and all(loc[0] == "body" for loc in locs)
    assert PAN not in response.text and "5555-5555-5555-4444" not in response.text


# -- strict types ----------------------------------------------------------------------------


@pytest.mark.parametrize("lane", LANES, ids=["lane", "fastapi"])
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("event_time", False),
        ("event_time", True),
        ("event_time", float(T0)),
        ("event_time", str(T0)),
        ("amount", True),
        ("amount", "12.5"),
        ("lat", False),
        ("lon", "0.5"),
        ("transaction_id", 12345),
    ],
)
def test_numbers_and_strings_are_strict(
    client: TestClient, field: str, value: Any, lane: dict[str, Any]
) -> None:
    response = post(client, body(**{field: value}), lane)
    assert response.status_code == 422, (field, value, response.text)
    assert [e["loc"] for e in response.json()["detail"]] == [["body", field]]


def test_an_integer_amount_and_coordinates_are_still_numbers(client: TestClient) -> None:
    assert post(client, body(amount=12, lat=51, lon=0), {}).status_code == 200


# -- control routes ----------------------------------------------------------------------------


def test_a_missing_token_is_401_with_a_challenge(client: TestClient) -> None:
    for method, path in (
        ("POST", "/v1/control/stats/reset"),
        ("POST", "/v1/control/runs"),
        ("DELETE", "/v1/control/runs/x"),
    ):
        response = client.request(method, path, json={"scenario": "x"})
        assert response.status_code == 401, (path, response.text)
        assert response.headers["www-authenticate"] == "Bearer"
    wrong = client.post("/v1/control/stats/reset", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    assert client.post("/v1/control/stats/reset", headers=AUTH).json() == {"reset": True}


def test_every_status_a_route_returns_is_documented(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    documented = {
        (method, path): set(op["responses"])
        for path, ops in paths.items()
        for method, op in ops.items()
    }
    assert {"201", "400", "401", "403", "404", "409", "422", "503"} <= documented[
        ("post", "/v1/control/runs")
    ]
    assert {"200", "401", "403", "404", "503"} <= documented[
        ("delete", "/v1/control/runs/{run_id}")
    ]
    assert {"200", "401", "403"} <= documented[("post", "/v1/control/stats/reset")]
    assert {"200", "400", "422"} <= documented[("post", "/v1/transactions")]
    assert {"200", "503"} <= documented[("get", "/v1/runs")]


def test_no_response_schema_is_a_string_beside_a_model(client: TestClient) -> None:
    """FastAPI publishes `{"type": "string"}` for a non-JSONResponse class; merged with a
    `responses=` model that made every valid body violate its own schema."""
    paths = client.get("/openapi.json").json()["paths"]
    for path, ops in paths.items():
        for method, op in ops.items():
            for status, response in op["responses"].items():
                for media, content in response.get("content", {}).items():
                    schema = content["schema"]
                    assert "$ref" in schema and "type" not in schema, (
                        method,
                        path,
                        status,
                        media,
                        schema,
                    )


# -- logs ------------------------------------------------------------------------------------


class Card:
    def __str__(self) -> str:
        return f"Card({PAN})"


def formatted(record: logging.LogRecord, formatter: logging.Formatter | None = None) -> str:
    PanScrubFilter().filter(record)
    return (formatter or logging.Formatter("%(message)s")).format(record)


def record(msg: str, args: Any, name: str = "api") -> logging.LogRecord:
    return logging.LogRecord(name, logging.INFO, __file__, 1, msg, args, None)


@pytest.mark.parametrize(
    ("msg", "args"),
    [
        ("card %s", (Card(),)),  # not a string: scrubbed once formatted
        ("card %d", (int(PAN),)),
        ("body %s", ({"card": PAN},)),
        ("card %s%s", (PAN[:8], PAN[8:])),  # split across arguments
        ("card %s", (f"{PAN}7",)),  # a digit glued on
        ("card %s", ("4111-1111-1111-1111-7",)),  # a separator and digit attached
        ("card %s", ("4111..1111..1111..1111",)),
        ("card %(pan)s", ({"pan": PAN},)),
    ],
)
def test_the_log_filter_scrubs_after_formatting(msg: str, args: Any) -> None:
    line = formatted(record(msg, args))
    assert "4111111111" not in line.replace("-", "").replace(".", ""), line


def test_access_lines_keep_their_format_and_lose_the_pan() -> None:
    access = record(
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", f"/v1/cards/{PAN}/last-use", "1.1", 404),
        name="uvicorn.access",
    )
    line = formatted(
        access, AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s')
    )
    assert PAN not in line
    assert "/v1/cards/************1111/last-use" in line and "404" in line


# -- the HTTP sink ---------------------------------------------------------------------------


def test_the_http_sink_scrubs_error_bodies_before_cutting_them() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        # The PAN straddles the 500th character: cut first, its first 10 digits would stay.
        return httpx.Response(422, content=b"x" * 490 + PAN.encode() + b" tail")

    inner = MemorySink()
    sink = HttpEventSink(
        inner, "http://api.test/v1/transactions", transport=httpx.MockTransport(handler)
    )
    sink.open(Topics("cards.transactions", "truth.cards"))
    records = Records([b"k"], [orjson.dumps({"transaction_id": "t0", "card_number": PAN})], [0])
    sink.write(records, records)
    report = sink.close()
    assert report.failed == 1
    assert all("4111111111" not in e for e in report.errors), report.errors


# -- the control plane -----------------------------------------------------------------------

FAIL = "import sys; sys.stderr.write('boom in /secret/dir\\n'); sys.exit(3)"


def test_runs_hide_stderr_workdir_and_overrides_without_the_token(tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "other.yaml").write_text("kind: scenario\nname: other\nentities: 10\n")
    manager = RunManager(
        tmp_path / "runs", scenario_dir=scenarios, command=lambda spec: [sys.executable, "-c", FAIL]
    )
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", TOKEN),
        publisher=MemoryPublisher(),
    )
    with TestClient(create_app(service, run_manager=manager)) as client:
        started = client.post(
            "/v1/control/runs",
            json={"scenario": "other", "overrides": {"entities": 5}},
            headers=AUTH,
        )
        assert started.status_code == 201
        run_id = started.json()["run_id"]
        assert manager.get(run_id).done.wait(180)
        for path in ("/v1/runs", f"/v1/runs/{run_id}"):
            open_view = client.get(path).json()
            (run,) = open_view.get("runs", [open_view])
            assert run["status"] == "failed" and run["exit_code"] == 3
            assert run["error"] is None and run["workdir"] is None and run["overrides"] is None
            assert "/secret/dir" not in str(open_view) and str(tmp_path) not in str(open_view)
            full = client.get(path, headers=AUTH).json()
            (run,) = full.get("runs", [full])
            assert "boom" in run["error"] and run["overrides"] == {"entities": 5}
            assert run["workdir"].startswith(str(tmp_path))
        assert PAN not in client.get(f"/v1/runs/{PAN}").text


def test_run_directories_hold_no_kafka_client_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "other.yaml").write_text("kind: scenario\nname: other\nentities: 10\n")
    stack = StackConfig.model_validate(
        {
            "kafka": {
                "bootstrap": "broker:9092",
                "client": {
                    "security.protocol": "SASL_SSL",
                    "sasl.username": "app",
                    "sasl.password": "hunter2-secret",
                    "ssl.key.password": "another-secret",
                },
            },
            "dirs": {"data": str(tmp_path / "data")},
        }
    )
    seen: list[RunSpec] = []
    # The child loads the stack file as `streamsim simulate` would, and prints its client.
    child = (
        "import json, os, sys; from core.config import load_stack; "
        "s = load_stack(sys.argv[1]); print(json.dumps(s.kafka.client))"
    )

    def command(spec: RunSpec) -> list[str]:
        seen.append(spec)
        return [sys.executable, "-c", child, str(spec.stack_file)]

    manager = RunManager(
        tmp_path / "runs", stack=stack, scenario_dir=scenarios, command=command, cwd=Path.cwd()
    )
    run = manager.start("other")
    assert run.done.wait(180)
    assert run.status == "finished", (run.error, run.exit_code)
    stack_file = seen[0].stack_file
    assert stack_file is not None
    written = stack_file.read_text()
    assert "hunter2" not in written and "another-secret" not in written
    client = yaml.safe_load(written)["kafka"]["client"]
    assert client == {"security.protocol": "SASL_SSL", "sasl.username": "app"}
    for name in ("stack.yaml", "scenario.yaml"):
        assert "hunter2" not in (run.workdir / name).read_text()
    # ... and yet the child's stack has them, from its environment.
    assert run.summary is not None
    assert run.summary["sasl.password"] == "hunter2-secret"
    assert run.summary["ssl.key.password"] == "another-secret"


def test_kafka_client_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KAFKA_CLIENT_ENV, '{"sasl.password": "s3cret", "acks": 1}')
    assert load_stack(None).kafka.client["sasl.password"] == "s3cret"
    monkeypatch.setenv(KAFKA_CLIENT_ENV, '["s3cret"]')
    with pytest.raises(ConfigError) as caught:
        load_stack(None)
    assert KAFKA_CLIENT_ENV in str(caught.value) and "s3cret" not in str(caught.value)
