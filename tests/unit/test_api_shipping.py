"""The owner-scoped shipping reads without Kafka: owner tokens (validation, never echoed), the
container view (legs across ships, late bulk arrivals, duplicates, owner conflicts, reruns)
and the routes (401/403, another owner's box a 404 like an unknown one, list and search)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from fastapi.testclient import TestClient

from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from api.main import create_app
from api.panel.models.shipping import ContainerHistory, ContainerList
from core.config import ConfigError, StackConfig
from core.config.owner_tokens import TOKENS_ENV, TOKENS_FILE_ENV, OwnerTokens, load_owner_tokens
from live.consumers.shipping import ShippingTail
from live.views.shipping import CONTAINERS_TOPIC, PORT_EVENTS_TOPIC, ContainerView

A, B = "bigblue", "duckworks"
TOKEN_A, TOKEN_B = "a-token-for-bigblue-0123456789", "b-token-for-duckworks-987654321"
CONTROL = "control-token-0123456789abcdef"
BOX_A, BOX_A2, BOX_B = "BBSU1234565", "BBSU7654321", "DKWU1111119"
RUN = "sh-00000001"


def reading(box: str, owner: str, seq: int, t: int, **more: Any) -> dict[str, Any]:
    return {
        "schema": "shipping.container/1",
        "event_id": f"{more.pop('run', RUN)}-{box}{seq:04d}",
        "container_id": box,
        "event_time": t,
        "seq": seq,
        "ship_id": "IMO9747455",
        "voyage_id": 1,
        "port": None,
        "owner": owner,
        "cargo": "pharma",
        "discharge_port": "SGSIN",
        "final_port": "AUMEL",
        "reefer": True,
        "setpoint_c": 3.5,
        "temp_c": 3.1,
        "power_kw": 5.0,
        "door_open": False,
        "shock_g": 0.1,
        "alarm": "none",
        "channel": "onboard",
        **more,
    }


def port_event(box: str, owner: str, kind: str, t: int, **more: Any) -> dict[str, Any]:
    return {
        "schema": "shipping.port-event/1",
        "event_id": f"{RUN}-p{box}{kind}{t}",
        "port": "SGSIN",
        "event_time": t,
        "seq": 0,
        "event": kind,
        "ship_id": "IMO9747455",
        "voyage_id": 1,
        "container_id": box,
        "owner": owner,
        "cargo": "pharma",
        **more,
    }


def raw(view: ContainerView, record: dict[str, Any], topic: str = CONTAINERS_TOPIC) -> None:
    view.add_raw(topic, orjson.dumps(record), record["event_time"] + 86_400_000)


# -- owner tokens ---------------------------------------------------------------------------


def test_owner_tokens_find_their_owner_and_hide_the_secrets() -> None:
    tokens = OwnerTokens({A: TOKEN_A, B: TOKEN_B})
    assert tokens.owner_of(TOKEN_A) == A and tokens.owner_of(TOKEN_B) == B
    assert tokens.owner_of(TOKEN_A[:-1]) is None and tokens.owner_of("") is None
    assert TOKEN_A not in repr(tokens) and A in repr(tokens)


@pytest.mark.parametrize(
    ("tokens", "says"),
    [
        ({}, "non-empty mapping"),
        (["x"], "non-empty mapping"),
        ({"bad owner": TOKEN_A}, "is not an owner name"),
        ({A: "short-secret"}, "16 to 512"),
        ({A: "has a space in it 0123456789"}, "16 to 512"),
        ({A: 1234567890123456789}, "16 to 512"),
        ({A: TOKEN_A, B: TOKEN_A}, "share a token"),
        ({A: CONTROL}, "control token"),
    ],
)
def test_bad_owner_tokens_are_refused_without_echoing_them(tokens: Any, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        OwnerTokens(tokens, control_token=CONTROL)
    for secret in (TOKEN_A, CONTROL, "short-secret", "has a space"):
        assert secret not in str(caught.value)


def test_owner_tokens_from_a_private_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKENS_ENV, raising=False)
    monkeypatch.delenv(TOKENS_FILE_ENV, raising=False)
    assert load_owner_tokens() is None  # disabled
    path = tmp_path / "owners.yaml"
    path.write_text(f"{A}: {TOKEN_A}\n{B}: {TOKEN_B}\n")
    os.chmod(path, 0o600)
    monkeypatch.setenv(TOKENS_FILE_ENV, str(path))
    loaded = load_owner_tokens()
    assert loaded is not None and loaded.owners == [A, B]
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        load_owner_tokens()
    os.chmod(path, 0o600)
    monkeypatch.setenv(TOKENS_ENV, orjson.dumps({A: TOKEN_A}).decode())
    with pytest.raises(ConfigError, match="not both"):
        load_owner_tokens()
    monkeypatch.delenv(TOKENS_FILE_ENV)
    loaded = load_owner_tokens()
    assert loaded is not None and loaded.owners == [A]
    monkeypatch.setenv(TOKENS_ENV, '{"bigblue": "' + TOKEN_A)  # broken JSON
    with pytest.raises(ConfigError, match="not JSON") as caught:
        load_owner_tokens()
    assert TOKEN_A not in str(caught.value)


# -- the view -------------------------------------------------------------------------------


def test_a_history_runs_across_ships_in_event_time_order() -> None:
    view = ContainerView(history_len=3)
    raw(view, port_event(BOX_A, A, "loaded", 1_000), PORT_EVENTS_TOPIC)
    # the live satellite alarm lands first, the voyage's held readings days later
    raw(view, reading(BOX_A, A, 3, 4_000, alarm="temperature", channel="satellite"))
    for seq in (0, 1, 2, 3):  # seq 3 again: a retried reading
        raw(view, reading(BOX_A, A, seq, 1_000 * (seq + 1)))
    raw(view, port_event(BOX_A, A, "unloaded", 5_000), PORT_EVENTS_TOPIC)
    raw(view, reading(BOX_A, A, 4, 9_000, ship_id="IMO9321483", voyage_id=7))  # transshipped
    history = view.history(A, BOX_A)
    assert history is not None
    ContainerHistory.model_validate(history)
    assert [r["seq"] for r in history["readings"]] == [2, 3, 4]
    assert history["readings"][-1]["emitted_at"] == 9_000 + 86_400_000
    legs = history["legs"]
    assert [(leg["ship_id"], leg["voyage_id"]) for leg in legs] == [
        ("IMO9747455", 1),
        ("IMO9321483", 7),
    ]
    assert legs[0]["readings"] == 4 and legs[0]["alarms"] == 1
    assert (legs[0]["loaded_at"], legs[0]["unloaded_at"]) == ("SGSIN", "SGSIN")
    assert [e["event"] for e in history["port_events"]] == ["loaded", "unloaded"]
    assert view.duplicates == 1 and view.readings == 5


def test_another_owners_record_is_dropped_and_a_rerun_starts_afresh() -> None:
    view = ContainerView()
    raw(view, reading(BOX_A, A, 0, 1_000))
    raw(view, reading(BOX_A, B, 1, 2_000))  # names another owner: never shown to either
    assert view.owner_conflicts == 1
    assert view.history(B, BOX_A) is None
    history = view.history(A, BOX_A)
    assert history is not None and len(history["readings"]) == 1
    raw(view, reading(BOX_A, A, 0, 5_000, run="sh-00000002"))  # a rerun reuses the number
    history = view.history(A, BOX_A)
    assert history is not None and [r["event_time"] for r in history["readings"]] == [5_000]
    view.add_raw(CONTAINERS_TOPIC, b"{not json", None)
    view.add_raw(CONTAINERS_TOPIC, orjson.dumps({"schema": "shipping.container/1"}), None)
    assert view.malformed == 2


def test_the_view_stays_bounded() -> None:
    view = ContainerView(max_containers=2)
    for i, box in enumerate((BOX_A, BOX_A2, BOX_B)):
        raw(view, reading(box, A, 0, i))
    assert [r["container_id"] for r in view.containers(A, 10)[0]] == [BOX_A2, BOX_B]
    assert view.evicted == 1
    with pytest.raises(ValueError):
        ContainerView(history_len=0)


# -- the routes -----------------------------------------------------------------------------


class Broker:
    """What `ShippingTail._refresh` asks of a consumer: the topics' partitions and end offsets."""

    def __init__(self, ends: dict[tuple[str, int], int]) -> None:
        self.ends = ends
        self.down = False

    def list_topics(self, timeout: float) -> SimpleNamespace:
        if self.down:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        names = {topic for topic, _ in self.ends}
        return SimpleNamespace(
            topics={
                t: SimpleNamespace(error=None, partitions={p: None for u, p in self.ends if u == t})
                for t in names
            }
        )

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float) -> tuple[int, int]:
        return 0, self.ends[(tp.topic, tp.partition)]

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        pass


def test_lag_says_as_of_when_so_records_written_later_are_not_taken_as_read() -> None:
    """Ends are read every `refresh_s`: a voyage flushed after the last read is behind a lag
    of 0, so `lag_as_of` says what that 0 covers (a reader waits for one after its writes)."""
    tail = ShippingTail(StackConfig.model_validate({}))
    key = (CONTAINERS_TOPIC, 0)
    broker = Broker({key: 10})
    assert tail.source()["lag_as_of"] is None  # never read: lag 0 covers nothing
    before = time.time_ns() // 1_000_000
    tail._refresh(broker)  # type: ignore[arg-type]
    tail._next[key] = 10  # read to the end
    first = tail.source()
    assert first["lag"] == 0 and first["lag_as_of"] >= before
    time.sleep(0.005)
    written = time.time_ns() // 1_000_000
    broker.ends[key] = 15  # a voyage flushed in port after that read
    stale = tail.source()
    assert stale["lag"] == 0 and stale["lag_as_of"] < written
    broker.down = True  # a failed read vouches for nothing new
    tail._refresh(broker)  # type: ignore[arg-type]
    assert tail.source()["lag_as_of"] == first["lag_as_of"] and tail.error
    broker.down = False
    tail._refresh(broker)  # type: ignore[arg-type]
    fresh = tail.source()
    assert fresh["lag"] == 5 and fresh["lag_as_of"] >= written


class HandFed(ShippingTail):
    """A tail whose view the test fills; it reads no Kafka."""

    def start(self) -> None:
        pass

    def stop(self, timeout_s: float = 10.0) -> None:
        pass


def service(control: str | None = CONTROL) -> FraudService:
    return FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", control),
        publisher=MemoryPublisher(),
    )


@pytest.fixture
def http() -> Iterator[TestClient]:
    tail = HandFed(StackConfig.model_validate({}))
    for box, owner in ((BOX_A, A), (BOX_A2, A), (BOX_B, B)):
        raw(tail.view, reading(box, owner, 0, 1_000))
    tokens = OwnerTokens({A: TOKEN_A, B: TOKEN_B}, control_token=CONTROL)
    with TestClient(create_app(service(), owner_tokens=tokens, shipping=tail)) as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_an_owner_sees_only_its_own_containers(http: TestClient) -> None:
    got = http.get("/v1/shipping/containers", headers=bearer(TOKEN_A))
    assert got.status_code == 200
    body = ContainerList.model_validate(got.json())
    assert body.owner == A and [c.container_id for c in body.containers] == [BOX_A, BOX_A2]
    assert http.get(f"/v1/shipping/containers/{BOX_A}", headers=bearer(TOKEN_A)).status_code == 200
    # another owner's box answers exactly as an unknown one
    theirs = http.get(f"/v1/shipping/containers/{BOX_B}", headers=bearer(TOKEN_A))
    unknown = http.get("/v1/shipping/containers/ZZZU0000000", headers=bearer(TOKEN_A))
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.json()["detail"].replace(BOX_B, "X") == unknown.json()["detail"].replace(
        "ZZZU0000000", "X"
    )
    # nor through search: B's prefix finds nothing for A, and B's own call finds it
    for q in ("DKWU", BOX_B):
        found = http.get("/v1/shipping/containers", params={"q": q}, headers=bearer(TOKEN_A))
        assert found.json()["containers"] == [] and found.json()["matched"] == 0
    found = http.get("/v1/shipping/containers", params={"q": "DKWU"}, headers=bearer(TOKEN_B))
    assert [c["container_id"] for c in found.json()["containers"]] == [BOX_B]


def test_the_list_keeps_to_one_run_when_asked(http: TestClient) -> None:
    tail: ShippingTail = http.app.state.shipping  # type: ignore[attr-defined]
    raw(tail.view, reading("BBSU2222222", A, 0, 2_000, run="sh-00000002"))
    listed = {
        run: [
            c["container_id"]
            for c in http.get(
                "/v1/shipping/containers", params={"run": run}, headers=bearer(TOKEN_A)
            ).json()["containers"]
        ]
        for run in (RUN, "sh-00000002", "sh-ffffffff")
    }
    assert listed == {RUN: [BOX_A, BOX_A2], "sh-00000002": ["BBSU2222222"], "sh-ffffffff": []}
    bad = http.get("/v1/shipping/containers", params={"run": "a b"}, headers=bearer(TOKEN_A))
    assert bad.status_code == 422


def test_owner_routes_need_an_owner_token(http: TestClient) -> None:
    for url in ("/v1/shipping/containers", f"/v1/shipping/containers/{BOX_A}"):
        none = http.get(url)
        assert none.status_code == 401 and none.headers["www-authenticate"] == "Bearer"
        assert http.get(url, headers=bearer("not-any-owners-token-000")).status_code == 401
        assert http.get(url, headers=bearer(CONTROL)).status_code == 401  # control is not owner
    assert http.get("/v1/shipping/containers/not-a-box", headers=bearer(TOKEN_A)).status_code == 422


def test_without_owner_tokens_the_routes_are_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKENS_ENV, raising=False)
    monkeypatch.delenv(TOKENS_FILE_ENV, raising=False)
    with TestClient(create_app(service())) as client:
        assert client.get("/v1/shipping/containers").status_code == 401
        disabled = client.get("/v1/shipping/containers", headers=bearer(TOKEN_A))
        assert disabled.status_code == 403 and TOKENS_ENV in disabled.json()["detail"]


def test_a_bad_token_config_stops_the_app_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKENS_FILE_ENV, raising=False)
    monkeypatch.setenv(TOKENS_ENV, orjson.dumps({A: CONTROL}).decode())
    with pytest.raises(ConfigError, match="control token"):
        create_app(service())
