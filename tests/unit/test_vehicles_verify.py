"""verify-stream on a vehicles run: the example's clocks and delivery pass their checks,
with tunnel and dead-zone outages on top of the configured ones and reconnect duplicates."""

from __future__ import annotations

from pathlib import Path

from scenarios.catalog import ScenarioConfig, run_scenario
from simulators.sinks import JsonlSink
from streamsim.config.kinds import load_file
from streamsim.verify import read_jsonl, verify

REPO = Path(__file__).resolve().parents[2]


def test_a_vehicle_run_passes_verify_stream_against_its_config(tmp_path: Path) -> None:
    _, example = load_file(REPO / "config" / "scenarios" / "vehicles.yaml")
    assert isinstance(example, ScenarioConfig)
    data = example.model_dump(mode="json")
    data.update(entities=300, duration_s=600)
    data["delivery"]["outages"]["flush_duplicates"] = 0.2  # plenty of reconnect duplicates
    cfg = ScenarioConfig.model_validate(data)
    run_scenario(cfg, JsonlSink(tmp_path), speed="max")
    report = verify(*read_jsonl(tmp_path, None), cfg)
    failed = {k: v for k, v in report["checks"].items() if not v["ok"]}
    assert report["ok"], failed
    car = report["checks"]
    assert car["car.outage_fraction"]["measured"] > car["car.outage_fraction"]["expected"]
    assert car["car.duplicate_fraction"]["expected"] > 0.002  # flush copies expected too
