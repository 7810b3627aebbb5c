"""Request and response schemas of the load-test routes (`api.panel.routes.loadtests`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from runs.loadtests import LoadTestStatus


class LoadTestFile(BaseModel):
    name: str = Field(description="What POST /v1/control/loadtests takes as `file`.")
    file: str
    target: str | None = Field(description="http, kafka or scenario; null when unreadable.")
    editable: dict[str, Any] = Field(
        description="The part of the file the panel may edit, as written: `load`, `warmup_s`, "
        "`duration_s`, `slo` (a `scenario` target: `target.http` and `target.kafka`'s `load` "
        "and `slo`)."
    )
    error: str | None = Field(description="Why the file cannot be read, if it cannot.")


class LoadTestFiles(BaseModel):
    files: list[LoadTestFile]
    tunable: list[str] = Field(description="The keys `edits` may set, dotted.")


class LoadTestRequest(BaseModel):
    """Start a load test from a file, with edits merged over it (nested mappings merge; a
    `load` of another `type` replaces the file's whole)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [
                {
                    "file": "no-such-file",
                    "edits": {
                        "load": {"type": "constant", "rate": 50},
                        "warmup_s": 1,
                        "duration_s": 5,
                        "slo": {"p99_ms": 50},
                    },
                }
            ]
        },
    )

    file: str = Field(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="A load-test file's name without .yaml, from GET /v1/loadtests/files.",
    )
    edits: dict[str, JsonValue] = Field(
        default_factory=dict,
        description="Only the rate shape (`load`), `warmup_s`, `duration_s` (at most 3600) and "
        "`slo` (a `scenario` target: `target.http|kafka.load|slo`), validated by the "
        "load-test model; any other key, or a bad value, is a 422 naming it.",
    )


class LiveFigures(BaseModel):
    """`streamsim loadtest --progress`: the figures so far, rewritten about once a second."""

    model_config = ConfigDict(extra="allow")

    phase: str = Field(description="warmup, measured, draining or done.")
    elapsed_s: float
    sent: int
    finished: int
    total: int
    achieved_rate: float = Field(description="Good answers/s since the previous update.")
    good: int
    errors: int
    latency_ms: dict[str, float | None] = Field(
        description="p50, p95, p99, max of the answers so far (from the intended send time)."
    )


class Chart(BaseModel):
    name: str = Field(description="latency_over_time, latency_percentiles, lag_over_time, ...")
    spec: dict[str, Any] = Field(description="A Vega-Lite v5 spec, data inline.")


class LoadTestInfo(BaseModel):
    run_id: str = Field(description="Its report folder's name under <dirs.data>/loadtests.")
    file: str | None = Field(description="The file it ran; null for a `streamsim loadtest` run.")
    name: str | None
    status: LoadTestStatus = Field(
        description="running, stopping; then finished (a report: see summary.ok), failed "
        "(no report), or stopped (by DELETE)."
    )
    started_at: int | None = Field(description="Epoch ms.")
    ended_at: int | None = Field(description="Epoch ms.")
    exit_code: int | None = Field(description="0 all SLOs met, 1 one failed (or no target).")
    edits: dict[str, Any] | None
    error: str | None = Field(description="A failed run's stderr tail. Only with the token.")
    progress: LiveFigures | None
    summary: dict[str, Any] | None = Field(
        description="The report's `loadtest --json` contract keys: requests, errors, "
        "achieved_rate, intended_rate, latency_ms, slo, ok."
    )
    report: dict[str, Any] | None = Field(description="The whole report (GET of one run).")
    charts: list[Chart] = Field(description="The report's Vega-Lite charts (GET of one run).")


class LoadTestList(BaseModel):
    runs: list[LoadTestInfo] = Field(description="Newest first, earlier reports included.")
