"""What the panel routes share: the app's feeds, run manager, run evaluations and load tests,
and the 503 they answer without them."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException, Request, status

from api.errors import ErrorBody
from api.panel.consumers.feeds import Feeds
from runs.evaluations import RunEvaluations
from runs.loadtests import LoadTestManager
from runs.manager import RunManager


def feeds_of(request: Request) -> Feeds:
    feeds: Feeds | None = getattr(request.app.state, "feeds", None)
    if feeds is None:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, "feeds need Kafka: this API runs without a stack"
        )
    return feeds


def runs_of(request: Request) -> RunManager:
    runs: RunManager | None = getattr(request.app.state, "runs", None)
    if runs is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "run control is not set up")
    return runs


def evaluations_of(request: Request) -> RunEvaluations:
    """The evaluations of the app's runs (503 without run control, as the runs)."""
    runs_of(request)
    found: RunEvaluations | None = getattr(request.app.state, "evaluations", None)
    if found is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "run control is not set up")
    return found


def loadtests_of(request: Request) -> LoadTestManager:
    manager: LoadTestManager | None = getattr(request.app.state, "loadtests", None)
    if manager is None:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, "load tests need a stack: this API runs without"
        )
    return manager


UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorBody, "description": "No Kafka configured."}
}
RUNS_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorBody, "description": "Run control is not set up."}
}
LOADTESTS_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorBody, "description": "Load tests are not set up (no stack)."}
}
