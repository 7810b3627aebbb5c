"""Settings of job `shipping`."""

from __future__ import annotations

import json

from pydantic import Field

from core.config.base import Settings
from core.contracts import topics
from pipeline.settings import Duration, topic_offsets

#: The job reads each topic as its kind of row (`job.SOURCES`): one input topic per kind,
#: named as here or ending in ".<name>" (MirrorMaker 2's `port.shipping.positions` at HQ).
INPUT_TOPICS = (
    topics.SHIPPING_POSITIONS.name,
    topics.SHIPPING_CONTAINERS.name,
    topics.SHIPPING_PORT_EVENTS.name,
)


def topics_by_kind(input_topics: list[str]) -> dict[str, str]:
    """Each of `INPUT_TOPICS` -> the input topic that carries its kind of event.

    >>> topics_by_kind(["port.shipping.positions", "shipping.containers",
    ...                 "port.shipping.port-events"])["shipping.positions"]
    'port.shipping.positions'
    """
    found: dict[str, list[str]] = {name: [] for name in INPUT_TOPICS}
    for topic in input_topics:
        kinds = [n for n in INPUT_TOPICS if topic == n or topic.endswith(f".{n}")]
        if not kinds:
            raise ValueError(
                f"job shipping reads each input topic as its kind of event: {topic!r} is none "
                f"of {list(INPUT_TOPICS)} (or a name ending in '.' and one of them)"
            )
        found[kinds[0]].append(topic)
    wrong = {name: got for name, got in found.items() if len(got) != 1}
    if wrong:
        raise ValueError(
            "job shipping needs exactly one input topic per kind of event "
            f"{list(INPUT_TOPICS)}; got {wrong}"
        )
    return {name: got[0] for name, got in found.items()}


def offsets_by_topic(starting_offsets: str, input_topics: list[str]) -> dict[str, str]:
    """Each input topic's `startingOffsets`: the job reads each topic with a source of its own
    (each record read once per query, not once per kind). ValueError when the JSON form misses
    an input topic or names another.

    >>> offsets_by_topic('{"a": {"0": 1}, "b": {"0": 2}}', ["a", "b"])["b"]
    '{"b": {"0": 2}}'
    """
    if starting_offsets not in ("earliest", "latest"):
        other = set(json.loads(starting_offsets)) - set(input_topics)
        if other:
            raise ValueError(
                f"starting_offsets names topics that are not input topics: {sorted(other)}"
            )
    return {topic: topic_offsets(starting_offsets, topic) for topic in input_topics}


def per_topic_cap(max_offsets_per_trigger: int | None) -> int | None:
    """`max_offsets_per_trigger` split evenly over the job's sources, one per kind: Spark caps
    each source, so a batch still reads at most the configured records in all. A topic with
    less backlog than its share leaves the rest unused.

    >>> per_topic_cap(1000), per_topic_cap(2), per_topic_cap(None)
    (333, 1, None)
    """
    if max_offsets_per_trigger is None:
        return None
    return max(1, max_offsets_per_trigger // len(INPUT_TOPICS))


class ShippingSettings(Settings):
    """Job `shipping`: per-container and per-ship logs, the shipping rules, days-late data.

    The job's `watermark` is the live one: an alert more than that behind its log's newest
    event when raised is published with `late: true`. Nothing is dropped for being later than
    it; only rows older than `history` behind their log's newest event are (and counted).
    """

    history: Duration = Field(
        "21 days",
        description="Event time a container's or ship's log keeps behind its newest event; "
        "older rows are dropped and counted (late_events of query shipping.late-drops). "
        "Longer than a voyage leg, so a voyage flushed in port is re-scored whole.",
    )
    settle: Duration = Field(
        "3 seconds",
        description="Processing time a log waits after its latest backfill rows (held on "
        "board, flushed in port) before it re-runs the rules: a voyage's backlog lands over "
        "several batches and is scored once, whole. Live rows do not put it off.",
    )
