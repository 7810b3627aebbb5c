"""A small seeded shipping scenario for tests: 4 ships, 400 boxes, 6 simulated days, incidents
far more frequent than by default, so each type the seed injects has support in seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.config.loader import load_model
from scenarios.catalog import ScenarioConfig

REPO = Path(__file__).resolve().parents[1]
SEED = 11


def small_shipping(run_id: str, seed: int = SEED) -> dict[str, Any]:
    """The scenario as a dict (for `ScenarioConfig.model_validate` or a YAML file)."""
    data = load_model(ScenarioConfig, REPO / "config/scenarios/shipping.yaml").model_dump(
        mode="json"
    )
    data.update(
        run_id=run_id,
        seed=seed,
        entities=4 + 400 + 30,
        duration_s=6 * 86_400.0,
        classes=[
            {"name": "ship", "share": 4},
            {"name": "container", "share": 400},
            {"name": "port", "share": 30},
        ],
    )
    data["domain"]["capacity"] = 150
    data["domain"]["incidents"].update(
        reefer_failure=0.2, door_tamper=0.05, missed_unload=0.1, route_deviation=0.5
    )
    return data
