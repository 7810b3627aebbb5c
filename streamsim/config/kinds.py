"""Which model validates a config file of each `kind:` (or of the folder it sits in)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from api.fraud.settings import ApiSettings
from core.config import ConfigError, StackConfig, read_yaml
from core.config.loader import validate, with_env
from pipeline.config import PipelineConfig
from scenarios.catalog import ScenarioConfig
from streamsim.loadtest.config import LoadTestConfig

KINDS: dict[str, type[BaseModel]] = {
    "stack": StackConfig,
    "scenario": ScenarioConfig,
    "pipeline": PipelineConfig,
    "loadtest": LoadTestConfig,
    "api": ApiSettings,
}
_FOLDER_KINDS = {"scenarios": "scenario", "pipelines": "pipeline", "loadtests": "loadtest"}


def kind_of(path: Path, data: dict[str, Any]) -> str:
    kind = data.get("kind") or _FOLDER_KINDS.get(path.parent.name)
    if kind is None:
        kind = "stack" if path.name.startswith("stack") else None
    if kind not in KINDS:
        allowed = ", ".join(KINDS)
        raise ConfigError(path, [f"key 'kind' has bad value {kind!r}: allowed are {allowed}"])
    return str(kind)


def load_file(path: str | Path) -> tuple[str, BaseModel]:
    """Validate any streamsim config file; returns its kind and the resolved model."""
    path = Path(path)
    data = read_yaml(path)
    kind = kind_of(path, data)
    model = validate(KINDS[kind], data, path)
    if isinstance(model, StackConfig):
        return kind, with_env(model)
    return kind, model
