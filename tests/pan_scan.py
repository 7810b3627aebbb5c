"""A scanner for full card numbers (PANs) left in a stack's topics, logs and Parquet lake.

Two checks, on everything read:

- any card number: a string that `core.pan.find_pan` reads as one, a Luhn-valid run of 12 to
  19 digits once separators (space, `-`, `.`, ...) are stripped;
- a known card number (the PANs the simulator issued, when given): its digits anywhere in the
  text with every non-digit stripped, numbers included.

What is read:

- topics: every record of every topic (`__` internals aside), start to end: its key, its
  headers, and its value;
- logs: every line of every log file under the data directory (`*.log`, `*.log.N`, `*.out`,
  `*.err`; the broker's segment files are its topics, read above);
- lake: every value of every Parquet file (nested lists, structs and maps flattened).

What is no card number is left to the known-PAN check alone, since 1 in 10 digit runs passes
Luhn by chance: numbers (a JSON number, a number column, an epoch millisecond in JSON), so JSON
(a record's value, a string column holding JSON) is parsed and only its strings, dict keys
included, go to `find_pan`; timestamps (`2026-11-24 07:19:30,123`, librdkafka's
`1795505136.015`), whose digit groups join into Luhn-valid runs; and hexadecimal ids (card
tokens `tok_<hex>`, UUIDs, hashes), whose digit runs do: these are blanked first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from core.config import StackConfig
from core.kafka import consumer_config
from core.pan import find_pan, mask, scrub_text

#: What is written like digits but is no card number: dates and times as loggers write them
#: (log4j, Python logging, ISO 8601, librdkafka's epoch seconds), and hexadecimal ids (card
#: tokens, UUIDs, alert ids of 16 hex digits, hashes of 32+), whose digit runs pass Luhn by
#: chance (an alert id like fd76745552895624 did, in CI).
_NOT_A_PAN = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\b\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?"
    r"|(?<![0-9.])1\d{9}\.\d{3,6}(?![0-9.])"
    r"|tok_[0-9a-f]{8,64}"
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|\b(?=[0-9a-f]*[a-f])(?:[0-9a-f]{16}|[0-9a-f]{32,})\b",
    re.IGNORECASE,
)
_NON_DIGIT = re.compile(r"[^0-9]+")
LOG_NAME = re.compile(r".*\.(?:log|out|err)(?:\.\d+)?$")


@dataclass(frozen=True)
class Hit:
    """Where a card number was found: the number masked, and the text with every PAN-like run
    masked (a report never repeats a card number)."""

    where: str
    masked: str
    context: str


def strings_of(value: Any) -> Iterator[str]:
    """Every string in a decoded JSON value: dict keys, values, list items."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings_of(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_of(item)


def _as_json(text: str) -> Any:
    """`text` decoded when it is a JSON object or array, else None."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


@dataclass
class Scanner:
    """Finds card numbers in text; `known`: PANs to look for in any digits, numbers too."""

    known: Iterable[str] = ()
    _known: set[str] = field(init=False)
    _lengths: set[int] = field(init=False)

    def __post_init__(self) -> None:
        self._known = set(self.known)
        self._lengths = {len(p) for p in self._known}

    def _known_in(self, text: str) -> str | None:
        if not self._known:
            return None
        digits = _NON_DIGIT.sub("", text)
        for n in self._lengths:
            for i in range(len(digits) - n + 1):
                if digits[i : i + n] in self._known:
                    return digits[i : i + n]
        return None

    def text(self, where: str, text: str) -> Hit | None:
        """The first card number in `text`: known digits anywhere, or any card number in a
        string (the strings of `text` if it is JSON), timestamps and hex ids blanked."""
        found, context = self._known_in(text), text
        if found is None:
            decoded = _as_json(text)
            for string in [text] if decoded is None else strings_of(decoded):
                found, context = find_pan(_NOT_A_PAN.sub(" ", string)), string
                if found is not None:
                    break
        if found is None:
            return None
        return Hit(where, mask(found), scrub_text(context)[:300])

    def record(
        self, where: str, key: bytes | None, value: bytes | None, headers: Any = None
    ) -> list[Hit]:
        """A Kafka record: its key, header names and values, and its value."""
        texts = [name for name, _ in headers or []]
        for raw in (key, *(v for _, v in headers or []), value):
            if raw is not None:
                texts.append(raw.decode("utf-8", "replace"))
        return [h for h in (self.text(where, t) for t in texts) if h is not None]

    def log(self, path: Path, start: int = 0) -> tuple[list[Hit], int]:
        """A log file's hits from byte `start` on, and its line count there."""
        hits, n = [], 0
        with path.open(encoding="utf-8", errors="replace") as lines:
            lines.seek(start)
            for n, line in enumerate(lines, 1):
                hit = self.text(f"{path}:{n}", line)
                if hit is not None:
                    hits.append(hit)
        return hits, n

    def parquet(self, path: Path) -> tuple[list[Hit], int]:
        """A Parquet file's hits in its values (numbers: the known-PAN check only), and the
        number of strings read."""
        table = pq.read_table(path)
        hits, n = [], 0
        for name in table.column_names:
            for values in _leaves(table.column(name)):
                kind = values.type
                if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
                    if pa.types.is_integer(kind) and self._known:
                        for number in values.drop_null().to_pylist():
                            found = self._known_in(str(number))
                            if found is not None:
                                hits.append(Hit(f"{path}:{name}", mask(found), mask(found)))
                    continue
                for text in values.drop_null().to_pylist():
                    n += 1
                    hit = self.text(f"{path}:{name}", text)
                    if hit is not None:
                        hits.append(hit)
        return hits, n

    def topics(
        self, stack: StackConfig, since: Mapping[str, Mapping[int, int]] | None = None
    ) -> tuple[list[Hit], dict[str, int]]:
        """Every record of every topic (from the offsets `since`, per topic and partition, when
        given): the hits, and records read per topic."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

        config = consumer_config(stack, "pan-scan", **{"enable.partition.eof": True})
        consumer = Consumer(config)
        try:
            meta = consumer.list_topics(timeout=30)
            names = [t for t in meta.topics if not t.startswith("__")]
            starts = {t: dict((since or {}).get(t, {})) for t in names}
            parts = [
                TopicPartition(t, p, starts[t].get(p, OFFSET_BEGINNING))
                for t in names
                for p in meta.topics[t].partitions
            ]
            left = set()
            for tp in parts:
                low, high = consumer.get_watermark_offsets(tp, timeout=30)
                if high > max(low, tp.offset):
                    left.add((tp.topic, tp.partition))
            consumer.assign(parts)
            hits: list[Hit] = []
            counts = dict.fromkeys(names, 0)
            while left:
                msg = consumer.poll(30)
                if msg is None:
                    raise TimeoutError(f"no record in 30 s; partitions unread: {sorted(left)}")
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        left.discard((msg.topic(), msg.partition()))
                        continue
                    raise RuntimeError(str(error))
                counts[msg.topic()] += 1
                where = f"{msg.topic()}[{msg.partition()}]@{msg.offset()}"
                hits.extend(self.record(where, msg.key(), msg.value(), msg.headers()))
            return hits, counts
        finally:
            consumer.close()


def _leaves(column: pa.ChunkedArray | pa.Array) -> Iterator[pa.Array]:
    """The leaf arrays of a column: lists, structs and maps flattened, dictionaries decoded."""
    kind = column.type
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    for chunk in chunks:
        if pa.types.is_dictionary(kind):
            yield from _leaves(chunk.dictionary_decode())
        elif pa.types.is_map(kind):
            yield from _leaves(chunk.keys)
            yield from _leaves(chunk.items)
        elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
            yield from _leaves(chunk.flatten())
        elif pa.types.is_struct(kind):
            for i in range(kind.num_fields):
                yield from _leaves(chunk.field(i))
        else:
            yield chunk


def log_files(root: Path, skip: tuple[Path, ...] = ()) -> list[Path]:
    """Log files under `root`, not under any of `skip`."""
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and LOG_NAME.match(p.name) and not any(p.is_relative_to(s) for s in skip)
    )


def topic_ends(stack: StackConfig) -> dict[str, dict[int, int]]:
    """Every topic's end offsets now, per partition: where a later scan of new records starts."""
    from core.kafka.admin import admin_client
    from core.kafka.offsets import end_offsets

    names = admin_client(stack).list_topics(timeout=30).topics
    return {t: end_offsets(stack, t) for t in names if not t.startswith("__")}
