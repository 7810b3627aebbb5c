"""The shipping job's config: one input topic per kind of event, by name or by a suffix
(MirrorMaker 2's `port.shipping.positions` at HQ)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import load_model
from pipeline.config import PipelineConfig
from pipeline.jobs.shipping.config import INPUT_TOPICS, topics_by_kind
from pipeline.jobs.shipping.job import SOURCES

REPO = Path(__file__).resolve().parents[2]


def test_the_job_reads_exactly_its_three_topics_in_any_order() -> None:
    assert set(INPUT_TOPICS) == set(SOURCES)
    shipped = load_model(PipelineConfig, REPO / "config/pipelines/shipping.yaml")
    assert sorted(shipped.input_topics) == sorted(INPUT_TOPICS)
    reordered = list(reversed(INPUT_TOPICS))
    cfg = PipelineConfig(job="shipping", input_topics=reordered, output_topic="alerts")
    assert cfg.input_topics == reordered


def test_mirrored_topics_are_read_as_their_kind() -> None:
    mirrored = [f"port.{name}" for name in INPUT_TOPICS]
    cfg = PipelineConfig(job="shipping", input_topics=mirrored, output_topic="alerts")
    assert topics_by_kind(cfg.input_topics) == {n: f"port.{n}" for n in INPUT_TOPICS}


@pytest.mark.parametrize(
    ("inputs", "says"),
    [
        (["shipping.positions"], "exactly one input topic per kind"),
        ([*INPUT_TOPICS, "port.shipping.positions"], "exactly one input topic per kind"),
        ([*INPUT_TOPICS, "other"], "'other' is none of"),
        (["a", "b", "c"], "'a' is none of"),
        (["xshipping.positions", *INPUT_TOPICS[1:]], "'xshipping.positions' is none of"),
    ],
)
def test_other_input_topics_are_refused_with_the_ones_it_reads(
    inputs: list[str], says: str
) -> None:
    with pytest.raises(ValueError, match=says) as error:
        PipelineConfig(job="shipping", input_topics=inputs, output_topic="alerts")
    assert "shipping.port-events" in str(error.value)
