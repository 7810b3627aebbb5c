"""The shipping job's config: it reads its three topics, each as its kind of event."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import load_model
from pipeline.config import PipelineConfig
from pipeline.jobs.shipping.config import INPUT_TOPICS
from pipeline.jobs.shipping.job import SOURCES

REPO = Path(__file__).resolve().parents[2]


def test_the_job_reads_exactly_its_three_topics_in_any_order() -> None:
    assert set(INPUT_TOPICS) == set(SOURCES)
    shipped = load_model(PipelineConfig, REPO / "config/pipelines/shipping.yaml")
    assert sorted(shipped.input_topics) == sorted(INPUT_TOPICS)
    reordered = list(reversed(INPUT_TOPICS))
    cfg = PipelineConfig(job="shipping", input_topics=reordered, output_topic="alerts")
    assert cfg.input_topics == reordered


@pytest.mark.parametrize(
    "inputs",
    [["shipping.positions"], [*INPUT_TOPICS, "other"], ["a", "b", "c"]],
)
def test_other_input_topics_are_refused_with_the_ones_it_reads(inputs: list[str]) -> None:
    with pytest.raises(ValueError, match=r"job shipping reads each of its topics") as error:
        PipelineConfig(job="shipping", input_topics=inputs, output_topic="alerts")
    assert "shipping.port-events" in str(error.value)
