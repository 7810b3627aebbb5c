"""Response schemas of the run-evaluation routes (`api.panel.routes.evaluations`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from runs.evaluations import EvaluationStatus


class RunKnobs(BaseModel):
    """What the run was started with, and the pacing it was given while running."""

    speed: float | str | None
    duration_s: float | None
    seed: int | None
    overrides: dict[str, Any] | None = Field(description="Only with the control token.")
    live: dict[str, Any] | None = Field(description="Pacing changed while running.")


class RunEvaluation(BaseModel):
    run_id: str
    scenario: str = Field(description="The run's scenario, as in GET /v1/runs.")
    status: EvaluationStatus = Field(
        description="waiting (for the running run to finish), running (`streamsim evaluate`), "
        "done (see report) or failed (see error)."
    )
    requested_at: int = Field(description="Epoch ms.")
    started_at: int | None = Field(description="Epoch ms: the evaluation's own start.")
    ended_at: int | None = Field(description="Epoch ms.")
    knobs: RunKnobs
    report: dict[str, Any] | None = Field(
        description="Once done: as `streamsim evaluate --json` prints it (scenario, run, paths "
        "with precision, recall, f1, support and latency_ms per label type, late_dropped, "
        "hard_negative_alerts; parity where a batch oracle applies)."
    )
    error: str | None = Field(description="Why it failed. Only with the control token.")


class RunEvaluationList(BaseModel):
    evaluations: list[RunEvaluation] = Field(description="Newest request first.")
