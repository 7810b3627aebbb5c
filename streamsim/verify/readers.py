"""Read an event stream and its truth, from JSONL files or from Kafka (to the end, then stop)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from core.config import StackConfig
from core.errors import StreamsimError
from core.kafka import consumer_config

STALL_TIMEOUT_S = 60.0


@dataclass
class Stream:
    """Event records in stream order (file order, or Kafka emit timestamp order)."""

    event_id: list[str]
    event_time: np.ndarray  # int64 ms
    key_order: np.ndarray  # positions in per-key delivery order (file order / partition+offset)
    timestamp: np.ndarray | None  # Kafka record timestamps (emit time); None for files
    key: list[str] | None  # Kafka keys; None for files
    malformed: int


@dataclass
class Truth:
    event_id: list[str]
    entity_id: list[str]
    true_time: np.ndarray
    event_time: np.ndarray
    emit_time: np.ndarray  # -1 when dropped
    outage_id: list[str | None]
    duplicate: np.ndarray  # bool
    dropped: list[str | None]
    label: list[str]
    device_id: list[str] | None = None  # when events pass through devices (e.g. terminals)

    def __post_init__(self) -> None:
        self.buffered = np.array([o is not None for o in self.outage_id], dtype=bool)
        self.overflow = np.array([d == "buffer_overflow" for d in self.dropped], dtype=bool)


def jsonl_paths(events: Path, truth: Path | None) -> tuple[Path, Path]:
    """`events` is a directory (with events.jsonl, truth.jsonl) or a file (truth beside it)."""
    if events.is_dir():
        events_file, truth_file = events / "events.jsonl", events / "truth.jsonl"
    else:
        events_file, truth_file = events, events.parent / "truth.jsonl"
    truth_file = truth or truth_file
    for path in (events_file, truth_file):
        if not path.is_file():
            raise StreamsimError(f"{path} not found (give --events DIR or FILE, and --truth FILE)")
    return events_file, truth_file


def read_lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        for line in f:
            if line.strip():
                yield line


def stream_from_values(
    values: Iterable[bytes],
    timestamps: list[int] | None = None,
    keys: list[str] | None = None,
    key_order: np.ndarray | None = None,
) -> Stream:
    ids: list[str] = []
    times: list[int] = []
    kept: list[int] = []
    malformed = 0
    for i, raw in enumerate(values):
        try:
            event = orjson.loads(raw)
            ids.append(str(event["event_id"]))
            times.append(int(event["event_time"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            malformed += 1
            continue
        kept.append(i)
    index = np.asarray(kept, dtype=np.int64)
    order = np.arange(len(ids)) if key_order is None else _restrict(key_order, index)
    return Stream(
        ids,
        np.asarray(times, dtype=np.int64),
        order,
        None if timestamps is None else np.asarray(timestamps, dtype=np.int64)[index],
        None if keys is None else [keys[i] for i in kept],
        malformed,
    )


def _restrict(order: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """Re-express an ordering of all records as an ordering of the kept ones."""
    position = np.full(order.shape[0], -1, dtype=np.int64)
    position[kept] = np.arange(kept.shape[0])
    mapped = position[order]
    return mapped[mapped >= 0]


def truth_from_values(values: Iterable[bytes]) -> Truth:
    rows = []
    for raw in values:
        try:
            rows.append(orjson.loads(raw))
        except orjson.JSONDecodeError as exc:
            raise StreamsimError(f"a truth record is not JSON ({exc}): {raw[:120]!r}") from None
    try:
        return Truth(
            [r["event_id"] for r in rows],
            [r["entity_id"] for r in rows],
            np.array([r["true_time"] for r in rows], dtype=np.int64),
            np.array([r["event_time"] for r in rows], dtype=np.int64),
            np.array([_or_minus_one(r["emit_time"]) for r in rows], dtype=np.int64),
            [r["outage_id"] for r in rows],
            np.array([r["duplicate_of"] is not None for r in rows], dtype=bool),
            [r["dropped"] for r in rows],
            [r["label"] for r in rows],
            [r["device_id"] for r in rows] if rows and "device_id" in rows[0] else None,
        )
    except KeyError as exc:
        raise StreamsimError(f"truth records lack the key {exc}; is this a truth stream?") from None


def _or_minus_one(value: int | None) -> int:
    return -1 if value is None else value


def read_jsonl(events: Path, truth: Path | None) -> tuple[Stream, Truth]:
    events_file, truth_file = jsonl_paths(events, truth)
    return stream_from_values(read_lines(events_file)), truth_from_values(read_lines(truth_file))


@dataclass
class _Records:
    values: list[bytes]
    keys: list[str]
    timestamps: list[int]
    partitions: list[int]
    offsets: list[int]


def consume_topic(stack: StackConfig, topic: str) -> _Records:
    """Every record in `topic` now, from the beginning up to the high watermarks."""
    group = f"streamsim-verify-{uuid.uuid4().hex[:12]}"
    consumer = Consumer(consumer_config(stack, group, **{"enable.partition.eof": False}))
    out = _Records([], [], [], [], [])
    try:
        metadata = consumer.list_topics(topic, timeout=15)
        info = metadata.topics.get(topic)
        if info is None or info.error is not None or not info.partitions:
            raise StreamsimError(f"topic {topic!r} not found at {stack.kafka.bootstrap_servers}")
        high = {}
        for p in info.partitions:
            _, high[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in high])
        remaining = {p for p, h in high.items() if h > 0}
        last_progress = time.monotonic()
        while remaining:
            batch = consumer.consume(num_messages=10_000, timeout=1.0)
            if batch:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > STALL_TIMEOUT_S:
                raise StreamsimError(f"reading {topic} stalled for {STALL_TIMEOUT_S:.0f}s")
            for msg in batch:
                if msg.error():
                    raise StreamsimError(f"reading {topic}: {msg.error()}")
                p, offset = int(msg.partition() or 0), int(msg.offset() or 0)
                if offset >= high[p]:
                    continue
                key = msg.key()
                out.values.append(msg.value() or b"")
                out.keys.append(key.decode() if key else "")
                out.timestamps.append(msg.timestamp()[1])
                out.partitions.append(p)
                out.offsets.append(offset)
                if offset + 1 >= high[p]:
                    remaining.discard(p)
    except KafkaException as exc:
        raise StreamsimError(f"cannot read {topic} from Kafka: {exc}") from None
    finally:
        consumer.close()
    return out


def read_kafka(stack: StackConfig, topic: str, truth_topic: str) -> tuple[Stream, Truth]:
    records = consume_topic(stack, topic)
    stamps = np.asarray(records.timestamps, dtype=np.int64)
    parts = np.asarray(records.partitions, dtype=np.int64)
    offsets = np.asarray(records.offsets, dtype=np.int64)
    by_emit = np.lexsort((offsets, parts, stamps))  # the global order: by emit time
    by_log = np.lexsort((offsets, parts))  # per key: the partition's log order
    rank = np.empty_like(by_emit)
    rank[by_emit] = np.arange(by_emit.shape[0])
    stream = stream_from_values(
        [records.values[i] for i in by_emit],
        stamps[by_emit].tolist(),
        [records.keys[i] for i in by_emit],
        key_order=rank[by_log],
    )
    truth = truth_from_values(consume_topic(stack, truth_topic).values)
    return stream, truth
