"""A run's overrides: merged over its scenario file, then validated, errors naming the key.
What they may set is the allow-list in `runs.tunable`.

Overrides are a mapping merged key by key over the file (`{"delivery": {"drops":
{"probability": 0.01}}}`): nested mappings merge, a distribution whose `type` changes is
replaced whole, lists are replaced whole. `classes` may also be a mapping of class name to the
keys to merge over that class (`{"classes": {"env_sensor": {"clock": {...}}}}`), since a class's
own clock and delivery keys win over the top-level ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import ValidationError

from core.config import ConfigError
from core.config.errors import key_path
from scenarios.catalog import ScenarioConfig, deep_merge


class InvalidOverrides(ValueError):
    """`problems`: FastAPI-style error items, `loc` relative to the overrides mapping."""

    def __init__(self, problems: list[dict[str, Any]]) -> None:
        self.problems = problems
        super().__init__("; ".join(p["msg"] for p in problems))


def apply_overrides(data: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`data` with `overrides` merged over it (see the module doc for `classes` by name)."""
    over = dict(overrides)
    classes = over.pop("classes", None)
    merged = deep_merge(dict(data), over)
    if isinstance(classes, Mapping):
        current = [dict(c) for c in merged.get("classes") or [{"name": "default"}]]
        names = [c.get("name", "default") for c in current]
        unknown = sorted(set(classes) - set(names))
        if unknown:
            raise InvalidOverrides(
                [
                    {
                        "loc": ["classes", name],
                        "msg": f"key 'classes.{name}' names no class of this scenario; "
                        f"the classes are {names}",
                        "type": "unknown_class",
                        "input": classes[name],
                    }
                    for name in unknown
                ]
            )
        for c in current:
            extra = classes.get(c.get("name", "default"))
            if isinstance(extra, Mapping):
                c.update(deep_merge(c, dict(extra)))
        merged["classes"] = current
    elif classes is not None:
        merged["classes"] = classes
    return merged


def validate_scenario(data: dict[str, Any], overrides: Mapping[str, Any]) -> ScenarioConfig:
    """The merged scenario as a ScenarioConfig; errors name the key (classes by name when the
    overrides gave them by name)."""
    try:
        return ScenarioConfig.model_validate(data)
    except ValidationError as exc:
        described = ConfigError.from_validation("overrides", exc).problems
        by_name = isinstance(overrides.get("classes"), Mapping)
        names = [c.get("name", "default") for c in data.get("classes") or []]
        problems = []
        for error, text in zip(exc.errors(include_url=False), described, strict=True):
            loc = [p for p in error["loc"] if not (isinstance(p, str) and "function-" in p)]
            index = loc[1] if len(loc) > 1 and loc[0] == "classes" else None
            if by_name and isinstance(index, int) and index < len(names):
                loc[1] = names[index]
                text = text.replace(key_path(tuple(error["loc"][:2])), f"classes.{loc[1]}")
            problems.append(
                {
                    "loc": loc,
                    "msg": text,
                    "type": error["type"],
                    "input": _plain(error.get("input")),
                }
            )
        raise InvalidOverrides(problems) from None


def _plain(value: Any) -> Any:
    try:
        return orjson.loads(orjson.dumps(value, default=str))
    except TypeError:
        return str(value)
