"""The cards section of a pipeline config: defaults, validation, the shipped file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from api.fraud.settings import ApiSettings, load_settings
from core.config import load_model
from core.config.errors import ConfigError
from detectors import SpendingParams, TerminalParams, TravelParams, VelocityParams
from pipeline.config import PipelineConfig
from pipeline.jobs.cards.config import CardsSettings
from pipeline.settings import WindowSpec, duration_ms

REPO = Path(__file__).resolve().parents[2]


def config(**cards: object) -> PipelineConfig:
    return PipelineConfig.model_validate(
        {
            "job": "cards",
            "input_topics": ["cards.transactions"],
            "output_topic": "alerts",
            "cards": cards,
        }
    )


def test_defaults() -> None:
    settings = config().cards
    assert settings.features_topic == "aggregates.card-features"
    assert [(w.length_ms, w.slide_ms) for w in settings.feature_windows] == [
        (60_000, 60_000),
        (600_000, 600_000),
        (3_600_000, 3_600_000),
    ]
    assert settings.rules == [
        "velocity",
        "compromised_terminal",
        "impossible_travel",
        "spending_anomaly",
    ]
    assert settings.deadletter_trigger.mode == "realtime"
    assert (settings.features_trigger.mode, settings.features_trigger.interval) == (
        "microbatch",
        "10 seconds",
    )


def test_thresholds_are_the_detectors_own_models() -> None:
    settings = config(velocity={"min_count": 7}, travel={"max_speed_kmh": 900}).cards
    assert isinstance(settings.velocity, VelocityParams) and settings.velocity.min_count == 7
    assert isinstance(settings.travel, TravelParams) and settings.travel.max_speed_kmh == 900
    assert isinstance(settings.terminal, TerminalParams)
    assert isinstance(settings.spending, SpendingParams)
    with pytest.raises(ValueError, match="min_cnt"):
        config(velocity={"min_cnt": 7})  # a misspelt threshold is an error
    with pytest.raises(ValueError, match="min_small_count"):
        config(velocity={"min_count": 2, "min_small_count": 3})  # the detector's own check


@pytest.mark.parametrize(
    ("window", "message"),
    [
        ({"length": "10 minutes", "slide": "20 minutes"}, "slide must be"),
        ({"length": "0 seconds"}, "length must be"),
        ({"length": "10 mins"}, "pattern"),
    ],
)
def test_bad_windows_are_refused(window: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        config(feature_windows=[window])


def test_empty_rules_and_unknown_rules_are_refused() -> None:
    with pytest.raises(ValueError):
        config(rules=[])
    with pytest.raises(ValueError):
        config(rules=["velocity", "teleport"])


def test_the_section_belongs_to_cards_only() -> None:
    with pytest.raises(ValueError, match="cards configures job cards"):
        PipelineConfig.model_validate(
            {
                "job": "sensors",
                "input_topics": ["x"],
                "output_topic": "y",
                "cards": {},
            }
        )
    plain = PipelineConfig(job="sensors", input_topics=["x"], output_topic="y")
    assert plain.cards == CardsSettings()


def test_duration_ms_and_window_spec() -> None:
    assert duration_ms("1 day") == 86_400_000
    assert duration_ms("1 second") == 1000
    assert WindowSpec(length="1 hour", slide="10 minutes").slide_ms == 600_000


def test_the_shipped_pipeline_file_loads() -> None:
    cfg = load_model(PipelineConfig, REPO / "config" / "pipelines" / "cards.yaml")
    assert cfg.job == "cards"
    assert cfg.input_topics == ["cards.transactions"] and cfg.output_topic == "alerts"
    defaults = CardsSettings()
    assert cfg.cards.velocity == defaults.velocity  # the file spells out the defaults
    assert cfg.cards.terminal == defaults.terminal


def test_a_bad_value_names_its_key(tmp_path: Path) -> None:
    path = tmp_path / "cards.yaml"
    path.write_text(
        "kind: pipeline\njob: cards\ninput_topics: [a]\noutput_topic: alerts\n"
        "cards:\n  terminal:\n    min_distinct_cards: 1\n"
    )
    with pytest.raises(ConfigError, match=re.escape("cards.terminal.min_distinct_cards")):
        load_model(PipelineConfig, path)


def test_rule_slide_defaults_to_a_minute_and_must_fit_the_rule_windows() -> None:
    assert config().cards.rule_slide_ms == 60_000
    assert config(rule_slide=None).cards.rule_slide_ms is None
    with pytest.raises(ValueError, match=r"rule_slide must be > 0 and at most .* \(300000 ms\)"):
        config(rule_slide="6 minutes", terminal={"window_s": 300})
    with pytest.raises(ValueError, match="rule_slide must be > 0"):
        config(rule_slide="0 seconds")


def test_state_store_defaults_to_memory_and_transform_with_state_needs_rocksdb() -> None:
    assert config().cards.state_store == "memory"
    tws = {"state_operator": "transformWithStateInPandas"}
    with pytest.raises(ValueError, match="transformWithStateInPandas needs state_store: rocksdb"):
        config(**tws)
    assert config(**tws, state_store="rocksdb").cards.state_store == "rocksdb"
    with pytest.raises(ValueError, match="state_store"):
        config(state_store="leveldb")


def test_the_job_and_the_endpoint_share_their_card_rule_thresholds() -> None:
    """Both packages spell the tuned defaults; neither may drift from the other or its file."""
    job, endpoint = CardsSettings(), ApiSettings()
    shipped_job = load_model(PipelineConfig, REPO / "config" / "pipelines" / "cards.yaml")
    shipped_endpoint = load_settings(REPO / "config" / "api.yaml")
    for settings in (endpoint, shipped_job.cards, shipped_endpoint):
        assert settings.velocity == job.velocity
        assert settings.terminal == job.terminal
        assert settings.terminal_key == job.terminal_key
        assert settings.spending == job.spending
