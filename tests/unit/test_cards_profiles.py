"""Cardholder profiles: one `cards.profile/1` record per card before the first transaction,
summarising the card's own habits; the endpoint's spending rule judges against them."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from api.fraud.models import TransactionRequest
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from core.config import StackConfig
from core.contracts import CARD_PROFILE
from scenarios.catalog import ScenarioConfig, build_scenario
from simulators.engine import Engine
from simulators.sinks import JsonlSink

SECRET = "profiles-test-secret-of-32-bytes-at-least"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("profiles")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STREAMSIM_PAN_SECRET", SECRET)
        cfg = ScenarioConfig.model_validate(
            {
                "name": "cards",
                "seed": 5,
                "entities": 2000,
                "duration_s": 3600,
                "tick_s": 30,
                "classes": [{"name": "pos_terminal"}, {"name": "online_gateway"}],
                "domain": {
                    "type": "cards",
                    "delivery": "http",
                    "fraud": {"account_takeover": {"rate_per_1k_card_hours": 10.0}},
                },
            }
        )
        scenario = build_scenario(cfg, StackConfig())
        scenario.post = False  # type: ignore[attr-defined]
        Engine(scenario, cfg, JsonlSink(folder), speed="max").run()
    return folder


def test_one_profile_per_card_before_the_run(run: Path) -> None:
    profiles = [orjson.loads(x) for x in (run / "profiles.jsonl").read_bytes().splitlines()]
    assert len(profiles) == len({p["card_token"] for p in profiles}) == 2000
    for p in profiles[:200]:
        assert tuple(p) == CARD_PROFILE.names
        assert p["schema"] == CARD_PROFILE.id and p["event_id"] == f"profile-{p['card_token']}"
        assert p["history_count"] == sum(p["category_counts"].values()) > 0
        assert p["typical_amount"] > 0 and p["usual_channel"] in ("card_present", "online")


def test_the_endpoint_flags_takeovers_against_the_profile(run: Path) -> None:
    service = FraudService(ApiSettings(), ApiSecrets(pan_secret=SECRET.encode(), api_token=None))
    for line in (run / "profiles.jsonl").read_bytes().splitlines():
        service.profiles.put(orjson.loads(line))
    truth = {
        t["event_id"]: t["label"]
        for t in map(orjson.loads, (run / "truth.jsonl").read_bytes().splitlines())
    }
    flagged: dict[str, int] = {}
    for line in (run / "events.jsonl").read_bytes().splitlines():
        body = orjson.loads(service.handle(TransactionRequest.model_validate_json(line)))
        for alert in body["evidence"]["alerts"]:
            if alert["label"] == "account_takeover":
                label = truth[alert["event_ids"][0]]
                flagged[label] = flagged.get(label, 0) + 1
    assert flagged.get("account_takeover", 0) >= 5
    assert flagged["account_takeover"] > flagged.get("none", 0)
