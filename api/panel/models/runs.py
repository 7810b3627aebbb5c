"""Request and response schemas of the run-control routes (`api.panel.routes.runs`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from api.errors import ErrorBody
from api.panel.runs import RunStatus

Speed = Annotated[float, Field(gt=0, le=1e6)] | Literal["max"]


class RunRequest(BaseModel):
    """Start one scenario run (`streamsim simulate` into Kafka)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [
                {
                    "scenario": "sensor_fleet",
                    "speed": 2.0,
                    "duration_s": 300,
                    "overrides": {
                        "entities": 2000,
                        "delivery": {"duplicates": {"probability": 0.01}},
                        "classes": {"env_sensor": {"delivery": {"drops": {"probability": 0.05}}}},
                    },
                }
            ]
        },
    )

    scenario: str = Field(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="A scenario file's name without .yaml, from GET /v1/scenarios.",
    )
    speed: Speed | None = Field(
        None, description="Simulated seconds per wall second, or 'max'. Default: the file's."
    )
    duration_s: float | None = Field(
        None, gt=0, le=1e9, description="Simulated seconds to generate. Default: the file's."
    )
    # At most 2**53 - 1: above it JSON numbers lose integer precision in many clients (and in
    # JSON Schema validators comparing as floats), so a seed could read back as another.
    seed: int | None = Field(None, ge=0, le=2**53 - 1, description="Default: the file's.")
    overrides: dict[str, JsonValue] = Field(
        default_factory=dict,
        description="Keys merged over the scenario file before validation: nested mappings "
        "merge, `classes` maps class names to their own keys. Only the scenario's `tunable` "
        "keys (GET /v1/scenarios) are accepted: rates, mixes, disorder, pacing, seed, "
        "duration and entities (at most 100,000); any other key is a 422 naming it.",
    )


def _tuning_schema(schema: dict[str, Any]) -> None:
    """What the validator says, in the schema: some field, and `speed` never null."""
    schema["minProperties"] = 1
    schema["examples"] = [{"speed": 10.0}, {"speed": "max", "max_rate": 2000}]
    speed = schema["properties"]["speed"]
    speed["anyOf"] = [s for s in speed["anyOf"] if s.get("type") != "null"]
    speed.pop("default", None)


class RunTuning(BaseModel):
    """Change a running run's pacing live; a field left out keeps its value."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra=_tuning_schema,
    )

    speed: Speed | None = Field(
        None, description="Simulated seconds per wall second from now on, or 'max'."
    )
    max_rate: float | None = Field(
        None, gt=0, le=1e9, description="Cap on events per wall second; null removes the cap."
    )

    @model_validator(mode="after")
    def _something(self) -> RunTuning:
        if not self.model_fields_set:
            raise ValueError("give speed and/or max_rate")
        if "speed" in self.model_fields_set and self.speed is None:
            raise ValueError("speed: a positive number or 'max', not null")
        return self

    def changes(self) -> dict[str, Any]:
        """The fields the request gave (a null max_rate included: it removes the cap)."""
        return {key: getattr(self, key) for key in sorted(self.model_fields_set)}


class RunInfo(BaseModel):
    run_id: str
    scenario: str
    status: RunStatus = Field(
        description="running, stopping; then finished (exit 0), failed, or stopped (by DELETE)."
    )
    pid: int | None
    started_at: int = Field(description="Epoch ms.")
    ended_at: int | None = Field(description="Epoch ms.")
    exit_code: int | None
    speed: float | str | None
    duration_s: float | None
    seed: int | None
    live: dict[str, Any] | None = Field(
        None,
        description="Pacing changed while running (PATCH): the latest `speed` and `max_rate` "
        "sent to the run; null when never changed.",
    )
    overrides: dict[str, Any] | None = Field(description="Only with the control token.")
    summary: dict[str, Any] | None = Field(
        description="`streamsim simulate --json` of a finished run: events, truth, "
        "duplicates, dropped, outages, events_per_s."
    )
    error: str | None = Field(
        description="The tail of stderr of a failed run. Only with the control token."
    )
    workdir: str | None = Field(
        description="The run's scenario, stack, stdout and stderr files. Only with the control "
        "token."
    )


class RunList(BaseModel):
    runs: list[RunInfo] = Field(description="Newest first.")


class ScenarioInfo(BaseModel):
    name: str = Field(description="What POST /v1/control/runs takes as `scenario`.")
    file: str
    config: dict[str, Any] | None = Field(description="Resolved: every default filled in.")
    error: str | None = Field(description="Why the file does not validate, if it does not.")
    tunable: list[str] = Field(
        description="The keys POST /v1/control/runs `overrides` may set for this scenario, "
        "dotted (`domain.faults.rate_per_hour.overheating`, `classes.truck.delivery.drops."
        "probability`); empty when the file does not validate."
    )


class ScenarioList(BaseModel):
    scenarios: list[ScenarioInfo]


__all__ = [
    "ErrorBody",
    "RunInfo",
    "RunList",
    "RunRequest",
    "RunTuning",
    "ScenarioInfo",
    "ScenarioList",
]
