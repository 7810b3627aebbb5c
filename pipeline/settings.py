"""Settings types every job shares: intervals, triggers, event-time windows."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import Field, model_validator

from core.config.base import Settings

Duration = Annotated[
    str,
    Field(
        pattern=r"^\d+ (millisecond|second|minute|hour|day)s?$",
        description="A Spark interval such as '30 seconds' or '10 minutes'.",
    ),
]
#: A state store provider: Spark's default in-memory (HDFS-backed) one, or RocksDB.
StateStore = Literal["memory", "rocksdb"]


class TriggerSettings(Settings):
    mode: Literal["microbatch", "realtime", "available_now"] = Field(
        "microbatch",
        description="microbatch; realtime (Spark's Real-time Mode, stateless queries only in "
        "Spark 4.2); available_now (process what is there, then stop).",
    )
    interval: Duration = Field(
        "0 seconds",
        description="Micro-batch interval, or the checkpoint interval in real-time mode.",
    )


def offsets_form(value: str) -> str:
    """A Kafka source's `startingOffsets`: earliest, latest, or Spark's JSON form; ValueError
    otherwise.

    >>> offsets_form('{"t": {"0": 42}}')
    '{"t": {"0": 42}}'
    """
    if value in ("earliest", "latest"):
        return value
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ValueError('use earliest, latest, or JSON like {"topic": {"0": 42}}')
    return value


def topic_offsets(value: str, topic: str) -> str:
    """`topic`'s part of a `startingOffsets` (`offsets_form`), for a source that subscribes to
    that topic alone: Spark asks the JSON form to name exactly the source's partitions.
    ValueError when the JSON form names no offsets for `topic`.

    >>> topic_offsets('{"a": {"0": 5}, "b": {"0": -2}}', "b"), topic_offsets("latest", "b")
    ('{"b": {"0": -2}}', 'latest')
    """
    if value in ("earliest", "latest"):
        return value
    offsets = json.loads(offsets_form(value))
    if topic not in offsets:
        raise ValueError(
            f"starting_offsets names no offsets for input topic {topic!r} (it has {list(offsets)})"
        )
    return json.dumps({topic: offsets[topic]})


UNIT_MS = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}


def duration_ms(duration: str) -> int:
    """Milliseconds of a Spark interval such as '10 minutes'.

    >>> duration_ms("10 minutes"), duration_ms("1 hour"), duration_ms("250 milliseconds")
    (600000, 3600000, 250)
    """
    amount, unit = duration.split()
    return int(amount) * UNIT_MS[unit.removesuffix("s")]


class WindowSpec(Settings):
    """An event-time window: tumbling (no slide) or sliding."""

    length: Duration = Field(description="Window length, e.g. '10 minutes'.")
    slide: Duration | None = Field(
        None, description="Slide interval for a sliding window; unset: tumbling."
    )

    @model_validator(mode="after")
    def _slide_fits(self) -> WindowSpec:
        if self.slide is not None and not 0 < duration_ms(self.slide) <= duration_ms(self.length):
            raise ValueError("slide must be > 0 and at most the window length")
        if duration_ms(self.length) <= 0:
            raise ValueError("length must be > 0")
        return self

    @property
    def length_ms(self) -> int:
        return duration_ms(self.length)

    @property
    def slide_ms(self) -> int:
        return self.length_ms if self.slide is None else duration_ms(self.slide)
