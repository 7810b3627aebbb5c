"""Request and response schemas of the run-control routes (`api.panel.routes.runs`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from api.errors import ErrorBody
from runs.components import Component, ComponentState
from runs.run import RunStatus

Speed = Annotated[float, Field(gt=0, le=1e6)] | Literal["max"]


class RunRequest(BaseModel):
    """Start one scenario run: the simulator into Kafka, the scenario's Spark job, and the
    fraud endpoint in POS mode (`components`)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [
                {
                    "scenario": "sensors",
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
    components: list[Component] | None = Field(
        None,
        min_length=1,
        description="What to start: `simulator`, `job` (the scenario's Spark job) and "
        "`endpoint` (the fraud endpoint, card scenarios in POS mode). Default: all the "
        "scenario needs. Must hold the simulator; a component the scenario does not need is "
        "a 422.",
    )

    @field_validator("components")
    @classmethod
    def _unique(cls, value: list[Component] | None) -> list[Component] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("components must not repeat")
        return value


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


class QueryProgress(BaseModel):
    """The latest batch report of one of the job's streaming queries (`metrics` topic)."""

    model_config = ConfigDict(extra="allow")

    query: str
    batch_id: int | None = Field(None, description="Counts from 0: the run's own checkpoints.")
    input_rows: int | None = None
    input_rows_per_s: float | None = None
    processed_rows_per_s: float | None = None
    watermark: str | None = None
    watermark_delay_s: float | None = Field(
        None, description="Report time minus watermark: wall clock against event time."
    )
    watermark_behind_newest_s: float | None = Field(
        None, description="Newest event time the batch read minus the watermark."
    )
    offsets_behind: int | None = Field(
        None, description="Records between the batch's end offsets and the topics' latest."
    )
    late_events: int | None = Field(None, description="Dropped as too late in that batch.")
    at: int | None = Field(None, description="Epoch ms of the report.")
    report_age_s: float | None = None


class ComponentInfo(BaseModel):
    name: Component
    state: ComponentState = Field(
        description="starting (the endpoint until healthy, the job until its first batch), "
        "running, exited (by itself: see exit_code), stopped (by the run's stop)."
    )
    pid: int | None = Field(description="Its process group too.")
    exit_code: int | None
    started_at: int | None = Field(description="Epoch ms.")
    ended_at: int | None = Field(description="Epoch ms.")
    progress: list[QueryProgress] | None = Field(
        description="The job's: the latest batch report per query since it started, when "
        "the API reads the metrics feed."
    )
    url: str | None = Field(description="The endpoint's. Only with the control token.")
    log: str | None = Field(description="Its log file. Only with the control token.")
    log_tail: str | None = Field(description="Its log's tail. Only with the control token.")


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
    job: str | None = Field(description="The scenario's Spark job, if the run starts it.")
    components: list[ComponentInfo] = Field(description="In start order.")
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
    "ComponentInfo",
    "ErrorBody",
    "QueryProgress",
    "RunInfo",
    "RunList",
    "RunRequest",
    "RunTuning",
    "ScenarioInfo",
    "ScenarioList",
]
