"""Load YAML into a config model: defaults filled in, env overrides applied, errors named.

Which model a file of each `kind:` takes is the shell's to know (`streamsim.config.kinds`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

import orjson
import yaml
from pydantic import BaseModel, ValidationError

from core.config.errors import ConfigError, key_path
from core.config.stack import ENV_OVERRIDES, KAFKA_CLIENT_ENV, StackConfig

M = TypeVar("M", bound=BaseModel)

DEFAULT_STACK_FILE = Path("config/stack.yaml")


def read_yaml(path: Path) -> dict[str, Any]:
    """Parse a YAML mapping; any failure becomes a ConfigError naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(path, [f"cannot read file: {exc.strerror or exc}"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(path, [f"not valid YAML{where}: {problem}"]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            path, [f"the top level must be a mapping of keys, got {type(data).__name__}"]
        )
    return data


def validate(model: type[M], data: dict[str, Any], source: str | Path) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError.from_validation(source, exc) from None


def load_model(model: type[M], path: str | Path) -> M:
    path = Path(path)
    return validate(model, read_yaml(path), path)


def load_stack(path: str | Path | None) -> StackConfig:
    """The stack settings: `path`, else $STREAMSIM_CONFIG, else config/stack.yaml if present,
    else defaults; then STREAMSIM_* environment overrides."""
    chosen = path or os.environ.get("STREAMSIM_CONFIG")
    if chosen is None and DEFAULT_STACK_FILE.exists():
        chosen = DEFAULT_STACK_FILE
    stack = load_model(StackConfig, chosen) if chosen else StackConfig()
    return with_env(stack)


def with_env(stack: StackConfig) -> StackConfig:
    data = stack.model_dump()
    applied = False
    for var, loc in ENV_OVERRIDES.items():
        value = os.environ.get(var)
        if value is None or value == "":
            continue
        node = data
        for key in loc[:-1]:
            node = node[key]
        node[loc[-1]] = value
        applied = True
    client = os.environ.get(KAFKA_CLIENT_ENV)
    if client:
        data["kafka"]["client"] = {**data["kafka"]["client"], **_client_settings(client)}
        applied = True
    if not applied:
        return stack
    try:
        return StackConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            names = [name for name, loc in ENV_OVERRIDES.items() if loc == tuple(err["loc"])]
            where = f"environment variable {names[0]}" if names else f"key '{key_path(err['loc'])}'"
            problems.append(f"{where} has bad value {err['input']!r}: {err['msg']}")
        raise ConfigError("environment", problems) from None


def _client_settings(text: str) -> dict[str, Any]:
    """$STREAMSIM_KAFKA_CLIENT: a JSON object of librdkafka settings (never echoed: it may
    hold secrets)."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict) or not all(
        isinstance(v, str | int | float | bool) for v in value.values()
    ):
        raise ConfigError(
            "environment",
            [
                f"environment variable {KAFKA_CLIENT_ENV} must be a JSON object of librdkafka "
                "settings with string, number or boolean values"
            ],
        )
    return value
