"""The shipping job's config: one input topic per kind of event, by name or by a suffix
(MirrorMaker 2's `port.shipping.positions` at HQ)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.config import load_model
from core.errors import StreamsimError
from pipeline.config import PipelineConfig
from pipeline.jobs.shipping.config import (
    INPUT_TOPICS,
    offsets_by_topic,
    per_topic_cap,
    topics_by_kind,
)
from pipeline.jobs.shipping.job import SOURCES, check_sources

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


def test_starting_offsets_are_split_per_topic_and_must_cover_the_inputs() -> None:
    mirrored = [f"port.{name}" for name in INPUT_TOPICS]
    given = {t: {"0": i, "1": -2} for i, t in enumerate(mirrored)}
    cfg = PipelineConfig(
        job="shipping",
        input_topics=mirrored,
        output_topic="alerts",
        starting_offsets=json.dumps(given),
    )
    split = offsets_by_topic(cfg.starting_offsets, cfg.input_topics)
    assert {t: json.loads(o) for t, o in split.items()} == {t: {t: p} for t, p in given.items()}
    assert offsets_by_topic("latest", mirrored) == dict.fromkeys(mirrored, "latest")
    with pytest.raises(
        ValueError, match=r"no offsets for input topic 'port\.shipping\.port-events'"
    ):
        offsets_by_topic(json.dumps({t: given[t] for t in mirrored[:2]}), mirrored)
    with pytest.raises(ValueError, match=r"not input topics: \['shipping.positions'\]"):
        offsets_by_topic(json.dumps(given | {"shipping.positions": {"0": 0}}), mirrored)


def test_a_batch_reads_at_most_the_configured_records_over_the_three_sources() -> None:
    assert per_topic_cap(None) is None
    assert 3 * per_topic_cap(90_000) == 90_000  # type: ignore[operator]
    assert per_topic_cap(1) == 1


def test_a_checkpoint_of_the_one_source_job_is_refused_with_what_to_do(tmp_path: Path) -> None:
    checkpoint = tmp_path / "shipping" / "alerts"
    offsets = checkpoint / "offsets"
    offsets.mkdir(parents=True)
    check_sources(checkpoint)  # nothing planned yet
    metadata = '{"batchWatermarkMs":0}'
    (offsets / "7").write_text(f'v1\n{metadata}\n{{"shipping.positions":{{"0":3}}}}\n')
    with pytest.raises(StreamsimError, match=r"1 Kafka source.*Delete .*shipping to start over"):
        check_sources(checkpoint)
    lines = "\n".join(json.dumps({t: {"0": 3}}) for t in INPUT_TOPICS)
    (offsets / "8").write_text(f"v1\n{metadata}\n{lines}\n")
    check_sources(checkpoint)
