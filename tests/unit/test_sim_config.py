"""ScenarioConfig: defaults, class inheritance, exact error messages, the example file."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import ConfigError
from core.config.loader import validate
from scenarios.catalog import ScenarioConfig
from streamsim.config.kinds import load_file

REPO = Path(__file__).resolve().parents[2]


def errors_for(data: dict) -> str:
    with pytest.raises(ConfigError) as info:
        validate(ScenarioConfig, data, "s.yaml")
    return str(info.value)


def test_classes_inherit_top_level_sections_key_by_key() -> None:
    cfg = ScenarioConfig.model_validate(
        {
            "delivery": {"delay_s": 0.3, "drops": {"probability": 0.1}},
            "classes": [
                {"name": "a", "share": 3, "delivery": {"drops": {"probability": 0.5}}},
                {"name": "b", "delivery": {"delay_s": {"type": "exponential", "mean": 2}}},
            ],
        }
    )
    a, b = cfg.classes
    assert a.delivery.delay_s.ppf(0.5) == 0.3 and a.delivery.drops.probability == 0.5
    assert b.delivery.delay_s.type == "exponential" and b.delivery.drops.probability == 0.1
    assert cfg.class_counts() == [750, 250]


def test_default_class_inherits_too() -> None:
    cfg = ScenarioConfig.model_validate({"clock": {"offset_s": 4}})
    assert [c.name for c in cfg.classes] == ["default"]
    assert cfg.classes[0].clock.offset_s.ppf(0.5) == 4


def test_class_counts_add_up() -> None:
    cfg = ScenarioConfig.model_validate(
        {"entities": 10, "classes": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}
    )
    assert sum(cfg.class_counts()) == 10 and max(cfg.class_counts()) == 4


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"delivery": {"delay_s": {"type": "uniform", "low": 2, "high": 1}}},
            "key 'delivery.delay_s' has bad value {'type': 'uniform', 'low': 2, 'high': 1}: "
            "high (1.0) must be >= low (2.0)",
        ),
        (
            {"classes": [{"name": "x", "clock": {"drift_ppm": {"type": "weird"}}}]},
            "key 'classes[0].clock.drift_ppm' has bad value {'type': 'weird'}",
        ),
        ({"start": "2026-01-01T00:00:00"}, "must include a timezone"),
        ({"pacing": {"speed": 0}}, "key 'pacing.speed' has bad value 0: speed must be > 0"),
        ({"classes": [{"name": "a"}, {"name": "a"}]}, "class names must be unique; repeated: a"),
        ({"delivery": {"drops": {"probability": 1.5}}}, "key 'delivery.drops.probability'"),
        ({"delivery": {"outages": {"drop_policy": "fifo"}}}, "'drop_oldest' or 'drop_newest'"),
        ({"domain": {"topic": "x"}}, "key 'domain' has bad value {'topic': 'x'}: needs a 'type'"),
        ({"domain": {"type": "spaceships"}}, "expected tags: 'sensors'"),
        ({"surprise": 1}, "key 'surprise' is not a known setting"),
        (
            {"domain": {"type": "sensors", "interval_s_by_class": {"nope": 3}}},
            "interval_s_by_class names unknown classes ['nope']",
        ),
    ],
)
def test_errors_name_the_key_the_value_and_the_rule(data: dict, message: str) -> None:
    assert message in errors_for(data)


def test_a_top_level_error_is_reported_once() -> None:
    text = errors_for({"delivery": {"max_delay_s": -1}, "classes": [{"name": "a"}]})
    assert text.count("max_delay_s") == 1


def test_the_example_scenario_is_valid_and_uses_every_section() -> None:
    kind, cfg = load_file(REPO / "config/scenarios/sensors.yaml")
    assert kind == "scenario" and isinstance(cfg, ScenarioConfig)
    assert cfg.name == "sensors" and len(cfg.classes) == 3
    env = next(c for c in cfg.classes if c.name == "env_sensor")
    assert env.delivery.outages.drop_policy == "drop_newest"
    assert env.delivery.outages.flush == "shuffled"
    assert env.clock.offset_s.ppf(0.5) == 0.0  # inherited from the top level
    legacy = next(c for c in cfg.classes if c.name == "legacy_logger")
    assert legacy.clock.resets.probability > 0 and legacy.delivery.drops.probability > 0
