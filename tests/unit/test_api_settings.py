"""API settings: thresholds from YAML (the detectors' own models), secrets from the environment."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from api.fraud.settings import ApiSettings, load_secrets, load_settings
from api.fraud.state import VerdictCache
from core.config import ConfigError, StackConfig
from core.errors import StreamsimError


def test_defaults_use_the_detectors_parameter_models() -> None:
    settings = load_settings(None)
    assert settings.topic == "cards.activity"
    assert settings.travel.max_speed_kmh == 1000.0
    assert settings.velocity.min_count == 3  # set on the cards-tuning suite
    assert settings.terminal is not None and settings.terminal.min_distinct_cards == 10
    assert settings.scoring.decline_at == 0.85


def test_yaml_sets_thresholds(tmp_path: Path) -> None:
    path = tmp_path / "api.yaml"
    path.write_text(
        "kind: api\ntravel:\n  max_speed_kmh: 900\nvelocity:\n  min_count: 7\n"
        "scoring:\n  weights: {impossible_travel: 0.7}\n"
    )
    settings = load_settings(path)
    assert settings.travel.max_speed_kmh == 900
    assert settings.travel.overhead_s == 1800.0  # the rest keeps its default
    assert settings.velocity.min_count == 7
    assert settings.scoring.weights == {"impossible_travel": 0.7}


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("travel:\n  max_sped_kmh: 900\n", "key 'travel.max_sped_kmh' is not a known setting"),
        ("velocity:\n  min_count: 0\n", "key 'velocity.min_count' has bad value 0"),
        ("scoring:\n  review_at: 0.9\n  decline_at: 0.5\n", "review_at must be <= decline_at"),
        ("scoring:\n  weights: {velocity: 2}\n", "weights.velocity must be in [0, 1]"),
    ],
)
def test_bad_settings_name_the_key(tmp_path: Path, text: str, named: str) -> None:
    path = tmp_path / "api.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert named in str(info.value)
    assert str(path) in str(info.value)


def test_settings_file_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "api.yaml"
    path.write_text("topic: cards.activity-test\n")
    monkeypatch.setenv("STREAMSIM_API_SETTINGS", str(path))
    assert load_settings(None).topic == "cards.activity-test"


def test_secrets_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMSIM_PAN_SECRET", "a-pan-secret-of-some-length")
    monkeypatch.setenv("STREAMSIM_API_TOKEN", "ctl-token")
    secrets = load_secrets(StackConfig())
    assert secrets.pan_secret == b"a-pan-secret-of-some-length"
    assert secrets.api_token == "ctl-token"
    assert "ctl-token" not in repr(secrets)
    monkeypatch.setenv("STREAMSIM_PAN_SECRET", "short")
    with pytest.raises(StreamsimError, match="at least 16 bytes"):
        load_secrets(StackConfig())


def test_without_env_a_stored_secret_is_created_once_and_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STREAMSIM_PAN_SECRET", raising=False)
    monkeypatch.delenv("STREAMSIM_API_TOKEN", raising=False)
    stack = StackConfig.model_validate({"dirs": {"data": str(tmp_path)}})
    first = load_secrets(stack)
    path = tmp_path / "api" / "pan-secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_secrets(stack).pan_secret == first.pan_secret
    assert first.api_token is None


def test_verdict_cache_is_bounded_by_count_and_age() -> None:
    cache = VerdictCache(max_entries=2, ttl_ms=1_000)
    cache.put("a", b"A", decided_at=0, now_ms=0)
    cache.put("b", b"B", decided_at=0, now_ms=0)
    assert cache.get("a", now_ms=10) == b"A"  # a is now the most recent
    cache.put("c", b"C", decided_at=0, now_ms=0)
    assert "b" not in cache and "a" in cache and "c" in cache
    assert cache.get("a", now_ms=1_000) is None  # expired
    cache.put("old", b"O", decided_at=0, now_ms=5_000)  # already expired: not kept
    assert "old" not in cache


def test_settings_are_frozen() -> None:
    with pytest.raises(ValueError):
        ApiSettings().topic = "other"  # type: ignore[misc]
