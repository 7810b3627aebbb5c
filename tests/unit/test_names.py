"""One name per domain (`core.names`): the retired names still work where a user types them,
and appear nowhere else in the tree."""

from __future__ import annotations

import re
import subprocess

import pytest
from typer.testing import CliRunner

from core.names import DOMAINS, RETIRED, canonical, canonical_keys
from pipeline.config import PipelineConfig
from scenarios.catalog import ScenarioConfig
from streamsim.cli import app
from tests.conftest import REPO_ROOT

#: Where a retired name may stay: the alias table, the migration note, the history.
ALLOWED = {"core/names.py", "docs/names.md", "CHANGELOG.md", "tests/unit/test_names.py"}
RETIRED_FORMS = re.compile(
    r"card[_-]velocity|connected[_-]vehicles|vehicle[_-]telemetry|sensor[_-]fleet|"
    r"window[_-]counts|CardVelocity|ConnectedVehicles|VehicleTelemetrySettings|SensorFleet|"
    r"WindowCounts|CARD_VELOCITY|CONNECTED_VEHICLES|SENSOR_FLEET|WINDOW_COUNTS",
    re.IGNORECASE,
)


def test_every_retired_name_stands_for_a_domain() -> None:
    assert set(RETIRED.values()) <= set(DOMAINS)
    assert all(canonical(name) == name for name in DOMAINS)


def test_the_tree_spells_each_domain_one_way() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    found = []
    for path in tracked:
        if path in ALLOWED or RETIRED_FORMS.search(path):
            found += [path] if path not in ALLOWED else []
            continue
        try:
            text = (REPO_ROOT / path).read_text(encoding="utf-8")
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        # VEHICLE_TELEMETRY is the event schema `vehicle.telemetry/1`, not the domain
        found += [
            f"{path}: {m.group(0)}"
            for m in RETIRED_FORMS.finditer(text)
            if m.group(0) != "VEHICLE_TELEMETRY"
        ]
    assert found == []


def test_a_pipeline_file_of_before_keeps_working(capsys: pytest.CaptureFixture[str]) -> None:
    cfg = PipelineConfig.model_validate(
        {
            "job": "window-counts",
            "input_topics": ["sensors.readings"],
            "output_topic": "aggregates.counts",
            "window_counts": {"sensor_alerts": True},
        }
    )
    assert cfg.job == "sensors" and cfg.sensors.sensor_alerts is True
    assert "'window-counts' is now 'sensors'" in capsys.readouterr().err


def test_a_scenario_file_of_before_keeps_working() -> None:
    cfg = ScenarioConfig.model_validate(
        {"name": "connected_vehicles", "domain": {"type": "connected_vehicles"}, "entities": 5}
    )
    assert cfg.name == "vehicles" and cfg.domain.type == "vehicles"


def test_the_cli_takes_a_retired_name() -> None:
    """`lab watermark` names the scenario it could not run: the new name, not the old."""
    result = CliRunner().invoke(
        app, ["lab", "watermark", "--scenario", "sensor-fleet", "--watermarks", "0s"]
    )
    assert result.exit_code == 1
    assert "note: 'sensor-fleet' is now 'sensors'" in result.output
    assert str(result.exception) == "--scenario 'sensors': the lab knows cards, vehicles"


def test_settings_keys_are_renamed_only_when_retired() -> None:
    plain = {"job": "cards", "cards": {}}
    assert canonical_keys(plain) is plain
