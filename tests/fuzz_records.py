"""Hostile input for the Spark jobs, generated with Hypothesis.

`malformed_records(n, seed)` draws `n` records of the kinds a real feed throws at a job:
truncated JSON, wrong types, NaN and Infinity, huge strings, deep nesting, missing ids, event
times in 1970 and 2200, non-UTF-8 bytes, and null keys. Each is (key, value, kind); `key` may be
None. The same seed gives the same records.
"""

from __future__ import annotations

import json
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
YEAR_1970 = 86_400_000  # 1970-01-02
YEAR_2200 = 7_258_118_400_000  # 2200-01-01

KINDS = (
    "truncated_json",
    "wrong_types",
    "nan_infinity",
    "huge_string",
    "deep_nesting",
    "missing_id",
    "time_1970",
    "time_2200",
    "non_utf8",
    "not_an_object",
)

Record = tuple[bytes | None, bytes, str]

_text = st.text(st.characters(codec="utf-8"), max_size=40)
_wrong = st.one_of(
    st.booleans(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.text(max_size=10).filter(lambda s: not s.strip().lstrip("-").isdigit()),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()),
)


def _event(entity_key: str, draw: st.DrawFn) -> dict[str, object]:
    n = draw(st.integers(0, 10**9))
    return {
        "schema": "fuzz/1",
        "event_id": f"fuzz-{n:x}",
        entity_key: f"e-{n % 97}",
        "event_time": T0 + draw(st.integers(0, 3_600_000)),
        "seq": n,
        "value": draw(st.floats(-1e6, 1e6)),
        "note": draw(_text),
    }


_rare = st.integers(0, 9).map(lambda n: n == 0)


def _dump(value: object) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


@st.composite
def malformed_record(draw: st.DrawFn, entity_key: str) -> Record:
    # Huge strings are few (each is up to 120 kB), the cheap kinds many.
    kind = draw(st.sampled_from(KINDS))
    if kind == "huge_string" and not draw(_rare):
        kind = "truncated_json"
    event = _event(entity_key, draw)
    key: bytes | None = draw(st.one_of(st.none(), st.just(str(event[entity_key]).encode())))
    if kind == "truncated_json":
        whole = _dump(event)
        value = whole[: draw(st.integers(1, len(whole) - 1))]
    elif kind == "wrong_types":
        field = draw(st.sampled_from(["event_id", "event_time"]))
        event[field] = draw(_wrong)
        value = _dump(event)
    elif kind == "nan_infinity":
        event["event_time"] = draw(st.sampled_from([float("nan"), float("inf"), float("-inf")]))
        event["value"] = float("nan")
        value = _dump(event)
    elif kind == "huge_string":
        size = draw(st.integers(20_000, 120_000))
        event["event_id"] = None
        event["note"] = draw(st.sampled_from("xyz€")) * size
        value = _dump(event)
    elif kind == "deep_nesting":
        depth = draw(st.integers(1_100, 5_000))
        value = b'{"event_id":"deep","event_time":1,"nested":' + b"[" * depth + b"]" * depth + b"}"
    elif kind == "missing_id":
        del event[draw(st.sampled_from(["event_id", "event_time"]))]
        value = _dump(event)
    elif kind == "time_1970":
        event["event_time"] = draw(st.integers(0, YEAR_1970))
        value = _dump(event)
    elif kind == "time_2200":
        event["event_time"] = YEAR_2200 + draw(st.integers(0, 10**9))
        value = _dump(event)
    elif kind == "non_utf8":
        raw = bytearray(_dump(event))
        raw[draw(st.integers(0, len(raw) - 1))] = draw(st.sampled_from([0x80, 0xC3, 0xFF, 0xFE]))
        value = bytes(raw)
    else:  # not_an_object
        value = _dump(draw(st.one_of(st.integers(), st.lists(st.integers()), st.none(), _text)))
    return key, value, kind


def malformed_records(n: int, seed: int, entity_key: str = "entity_id") -> list[Record]:
    """`n` records drawn by Hypothesis (seeded, no example database)."""
    drawn: list[Record] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(malformed_record(entity_key))
    def collect(record: Record) -> None:
        drawn.append(record)

    collect()
    # Hypothesis may end early once it has explored a space; top up with its own draws.
    rng = random.Random(seed)
    while len(drawn) < n:
        drawn.append(drawn[rng.randrange(len(drawn))])
    return drawn[:n]
