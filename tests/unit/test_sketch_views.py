"""The panel's sketches: `GET /v1/sketches` (the newest window's heavy hitters and distinct
counts, estimates with their bounds) and the Live page's tables of them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from api.main import create_app
from api.panel.routes import sketches as route
from core.config import StackConfig
from core.contracts import topics
from live.consumers.feeds import Feeds
from ui.sections.sketches import distinct_frame, heavy_frame


def heavy(key: str, start: int, rank: int, estimate: int) -> dict[str, Any]:
    return {
        "job": "cards",
        "kind": "terminal",
        "key": key,
        "window_start": start,
        "window_end": start + 300_000,
        "rank": rank,
        "estimate": estimate,
        "window_items": 1_000,
        "overcount_bound": 10.0,
        "eps": 0.01,
        "delta": 0.01,
    }


def distinct(key: str, start: int, estimate: float) -> dict[str, Any]:
    return {
        "job": "cards",
        "kind": "terminal",
        "key": key,
        "of": "card",
        "window_start": start,
        "window_end": start + 300_000,
        "estimate": estimate,
        "rse": 0.01625,
        "lg_config_k": 12,
    }


class HandFed(Feeds):
    def start(self) -> None:
        pass


@pytest.fixture
def http(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    records = {
        topics.HEAVY_HITTERS.name: [
            heavy("t9", 0, 1, 70),  # an older window
            heavy("t2", 300_000, 2, 40),
            heavy("t1", 300_000, 1, 55),
            {"not": "a record"},
        ],
        topics.DISTINCT_COUNTS.name: [distinct("t1", 300_000, 12.0), distinct("t2", 300_000, 30.0)],
    }
    monkeypatch.setattr(route, "tail_records", lambda stack, topic: records[topic])
    stack = StackConfig.model_validate({"dirs": {"data": str(tmp_path)}})
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", "t"),
        publisher=MemoryPublisher(),
    )
    app = create_app(service, feed=HandFed(stack, "cards.activity-unit"))
    with TestClient(app) as client:
        yield client


def test_the_route_shows_the_newest_window_ranked(http: TestClient) -> None:
    body = http.get("/v1/sketches").json()
    assert [r["key"] for r in body["heavy_hitters"]] == ["t1", "t2"]
    assert body["heavy_hitters"][0]["eps"] == 0.01
    assert [r["key"] for r in body["distinct_counts"]] == ["t2", "t1"]
    assert [r["key"] for r in http.get("/v1/sketches?limit=1").json()["heavy_hitters"]] == ["t1"]
    assert "/v1/sketches" in http.get("/openapi.json").json()["paths"]


def test_without_kafka_the_route_is_unavailable() -> None:
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", None),
        publisher=MemoryPublisher(),
    )
    with TestClient(create_app(service)) as client:
        assert client.get("/v1/sketches").status_code == 503


def test_tables_say_they_are_estimates_with_their_bound() -> None:
    table = heavy_frame([heavy("t1", 0, 1, 55)])
    assert table["estimate"].tolist() == ["≤ 55 (≥ 45)"] and table["ε / δ"].tolist() == [
        "0.01 / 0.01"
    ]
    assert distinct_frame([distinct("t1", 0, 400.0)])["estimate"].tolist() == ["≈ 400 ± 6 (1 rse)"]
