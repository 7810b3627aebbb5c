"""`bench pipeline --job JOB --pipeline FILE`: which config the bench runs the job under."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import StreamsimError
from streamsim.bench.pipeline.jobs import pipeline_config


def test_the_job_runs_under_its_own_file_by_default() -> None:
    assert pipeline_config("cards", None).cards.rules_form == "python"


def test_another_file_of_the_same_job_is_benched(tmp_path: Path) -> None:
    own = Path("config/pipelines/cards.yaml").read_text()
    assert "\ncards:\n" in own  # the job's own section, which the copy sets the form in
    engine = tmp_path / "cards-engine.yaml"
    engine.write_text(own.replace("\ncards:\n", "\ncards:\n  rules_form: engine\n", 1))
    assert pipeline_config("cards", engine).cards.rules_form == "engine"


def test_a_file_of_another_job_is_refused() -> None:
    with pytest.raises(StreamsimError, match="not the benched 'cards'"):
        pipeline_config("cards", Path("config/pipelines/sensors.yaml"))
