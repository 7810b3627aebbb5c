"""The decisions of `streamsim chaos` that need no stack: each fault's defaults and pace, and
the exit status and closing line of a run (a fault that never landed is not a loss)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from scenarios.catalog import ScenarioConfig
from streamsim.chaos import FAULTS
from streamsim.chaos.defaults import DEFAULTS, JOB_ENTITIES, plan
from streamsim.chaos.driver import Hurry
from streamsim.chaos.report import (
    EXIT_FAILED,
    EXIT_NOT_INJECTED,
    EXIT_OK,
    ChaosReport,
    outcome,
)
from streamsim.cli import app
from streamsim.cli.simulate import load_scenario

CLI = CliRunner(env={"COLUMNS": "240"})


def report(**changes: Any) -> ChaosReport:
    base: dict[str, Any] = {
        "scenario": "cards",
        "fault": "driver",
        "sent": 2000,
        "lost": 0,
        "unexpected_duplicates": 0,
        "duplicate_alert_ids": 0,
        "recovery_s": 4.0,
        "ok": True,
    }
    return ChaosReport(**(base | changes))


def test_every_fault_has_defaults() -> None:
    assert set(DEFAULTS) == set(FAULTS)


@pytest.mark.parametrize("fault", [f for f in FAULTS if f != "endpoint"])
def test_default_pace_spreads_the_events_over_the_fault_s_wall_time(fault: str) -> None:
    run = plan(fault)
    produce_s = DEFAULTS[fault].produce_s
    assert produce_s is not None and run.events == DEFAULTS[fault].events
    assert run.speed == "max" and run.max_rate is not None
    assert math.isclose(run.events / run.max_rate, produce_s)
    assert math.isclose(plan(fault, events=600).max_rate or 0, 600 / produce_s)


def test_an_explicit_speed_or_entity_count_wins_and_lifts_the_cap() -> None:
    assert plan("driver", events=2000, speed=300.0, entities=500) == plan(
        "driver", 2000, 300.0, 500
    )
    run = plan("driver", events=2000, speed=300.0, entities=500)
    assert (run.events, run.speed, run.max_rate, run.entities_of(100_000)) == (
        2000,
        300.0,
        None,
        500,
    )
    assert plan("broker", speed="max").max_rate is None


def test_job_faults_default_to_few_cards_other_scenarios_keep_theirs() -> None:
    assert plan("driver").entities_of(100_000) == JOB_ENTITIES
    assert plan("lake-full").entities_of(100_000) == JOB_ENTITIES
    assert plan("driver").entities_of(250) == 250  # a smaller scenario keeps its own
    assert plan("driver", entities=5000).entities_of(250) == 5000  # given: as given
    assert plan("broker").entities_of(100_000) == plan("broker-of-3").entities_of(100_000)
    assert plan("broker").entities_of(100_000) == 100_000


def test_endpoint_sends_requests_not_a_scenario() -> None:
    run = plan("endpoint")
    assert (run.speed, run.max_rate) == (None, None)
    assert "5,000 requests" in run.describe("cards", 100_000)


def test_plan_applies_the_cap_and_entities_to_the_scenario() -> None:
    cards = load_scenario(Path("config/scenarios/cards.yaml"))
    applied = plan("driver").apply(cards)
    assert isinstance(applied, ScenarioConfig)
    assert applied.entities == JOB_ENTITIES != cards.entities
    assert applied.pacing.max_rate == pytest.approx(12_000 / 90)
    sensors = load_scenario(Path("config/scenarios/sensors.yaml"))
    assert plan("broker").apply(sensors).entities == sensors.entities
    assert plan("broker", speed=2.0).apply(sensors).pacing.max_rate is None


def test_the_first_line_says_what_is_sent_and_how_long_to_expect() -> None:
    line = plan("driver").describe("cards", 100_000)
    assert line.startswith("driver fault on cards: 12,000 events of 2,000 entities over about 90s")
    assert "expect about" in line
    line = plan("broker", speed=1.0).describe("sensors", 20_000)
    assert "20,000 events of 20,000 entities at speed 1.0" in line


def test_outcome_ok() -> None:
    assert outcome(report()) == (EXIT_OK, None)
    # the endpoint's verdict allows decisions lost within the publish linger's window
    assert outcome(report(fault="endpoint", lost=35)) == (EXIT_OK, None)


def test_outcome_a_fault_that_never_landed_is_not_a_loss() -> None:
    code, line = outcome(
        report(ok=False, recovery_s=float("nan"), not_injected="the simulator finished first")
    )
    assert code == EXIT_NOT_INJECTED != EXIT_FAILED
    assert line is not None and "was not injected: the simulator finished first" in line
    assert "lost or duplicated" not in line


@pytest.mark.parametrize(
    "counted", [{"lost": 1}, {"unexpected_duplicates": 2}, {"duplicate_alert_ids": 1}]
)
def test_outcome_a_counted_loss_fails_injected_or_not(counted: dict[str, int]) -> None:
    code, line = outcome(report(ok=False, **counted))
    assert code == EXIT_FAILED and line is not None and "lost or duplicated" in line
    code, line = outcome(report(ok=False, not_injected="never killed", **counted))
    assert code == EXIT_FAILED and line is not None
    assert "although the driver fault was not injected (never killed" in line


def test_outcome_a_failed_check_without_loss_says_so() -> None:
    code, line = outcome(report(ok=False))
    assert code == EXIT_FAILED and line is not None
    assert "lost and duplicated nothing, but a check of the run failed" in line


def test_json_has_no_nan() -> None:
    assert report(recovery_s=float("nan")).to_json()["recovery_s"] is None
    assert report(recovery_s=1.23456).to_json()["recovery_s"] == 1.235


def test_cli_exits_3_and_says_the_fault_was_not_injected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, Any] = {}

    def not_injected(config: ScenarioConfig, stack: object, **kwargs: Any) -> ChaosReport:
        seen.update(kwargs, entities=config.entities, max_rate=config.pacing.max_rate)
        return report(
            ok=False, recovery_s=float("nan"), not_injected="the simulator sent all events first"
        )

    monkeypatch.setattr("streamsim.chaos.driver.run_driver_fault", not_injected)
    result = CLI.invoke(app, ["chaos", "cards", "--fault", "driver"])
    assert result.exit_code == EXIT_NOT_INJECTED, result.output
    assert "driver fault on cards: 12,000 events of 2,000 entities over about 90s" in result.output
    assert "was not injected: the simulator sent all events first" in result.output
    assert "lost or duplicated" not in result.output
    assert seen["events"] == 12_000 and seen["speed"] == "max"
    assert seen["entities"] == JOB_ENTITIES and seen["max_rate"] == pytest.approx(12_000 / 90)


def test_cli_exits_1_on_a_counted_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "streamsim.chaos.driver.run_driver_fault",
        lambda *a, **k: report(ok=False, lost=3),
    )
    result = CLI.invoke(app, ["chaos", "cards", "--fault", "driver"])
    assert result.exit_code == EXIT_FAILED
    assert "the driver fault lost or duplicated records (3 lost" in result.output


def test_hurry_lifts_the_pace_once_after_the_kill() -> None:
    hurry = Hurry()
    assert hurry() is None and hurry() is None  # paced until the kill
    hurry.go()
    assert hurry() == {"speed": "max", "max_rate": None}
    assert hurry() is None  # said once
