"""What is down behind the panel, said at the top of every page with the command that starts
it: Kafka (from the API's health), and on the pages fed by a Spark job, the job (no report
on the `metrics` topic for `STALE_S`). The API being down each page says itself (`ui.view`)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from ui.client import ApiClient, ApiError, ApiUnavailable

KAFKA_DOWN = "Kafka down"
JOB_DOWN = "No Spark job running"
#: A job whose latest report is older than this is taken for stopped.
STALE_S = 60.0


def down_notes(health: dict[str, Any], pipeline: dict[str, Any] | None) -> list[str]:
    """One note per thing that is down. `pipeline`: GET /v1/pipeline, on a page fed by a job
    (None: the page needs none)."""
    kafka = health.get("kafka") or {}
    if not kafka.get("connected", True):
        where = f" at `{kafka['bootstrap']}`" if kafka.get("bootstrap") else ""
        why = f" ({kafka['error']})" if kafka.get("error") else ""
        return [
            f"**{KAFKA_DOWN}** — the API cannot reach Kafka{where}{why}. Start it with "
            "`streamsim kafka up`, or point the stack's `kafka.bootstrap` at a running broker."
        ]
    if pipeline is not None and not fresh(pipeline.get("queries") or []):
        return [
            f"**{JOB_DOWN}** — none has reported on the `metrics` topic in the last "
            f"{STALE_S:.0f} s. Start one with `streamsim pipeline run JOB` (or start a run, job "
            "included, on the Runs page)."
        ]
    return []


def fresh(queries: list[dict[str, Any]]) -> bool:
    """Whether a query reported within `STALE_S` (the feed keeps old reports of stopped jobs)."""
    ages = [q.get("report_age_s") for q in queries]
    return any(isinstance(age, int | float) and age <= STALE_S for age in ages)


def show_down(client: ApiClient, *, needs_job: bool) -> None:
    """The notes as warnings; nothing when the API itself does not answer (the page says so)."""
    try:
        health = client.health()
        pipeline = client.pipeline() if needs_job else None
    except (ApiUnavailable, ApiError):
        return
    for note in down_notes(health, pipeline):
        st.warning(note, icon=":material/power_off:")
