"""Compromised cards' Bloom filters: built by Spark's `bloom_filter_agg` on batch DataFrames,
read and queried in Python bit for bit (`detectors.cards.bloom.SparkBloomFilter`)."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from detectors.cards.bloom import (
    TOKEN_KEY_SQL,
    CompromisedCardParams,
    SparkBloomFilter,
    murmur3_hash_long,
    optimal_num_hashes,
    token_key,
)
from detectors.cards.terminal import TerminalParams
from pipeline.jobs.cards.bloom import bloom_filter_agg
from pipeline.jobs.cards.config import CardsSettings
from streamsim.evaluate.bloom import (
    COLUMNS,
    bloom_figures,
    exact_members,
    python_filters,
    spark_windows,
    window_figures,
)

SETTINGS = CardsSettings(profiles_topic=None, rules=["compromised_terminal"])
T0 = 1_700_000_400_000  # a 10-minute boundary


def tokens(n: int, salt: str) -> list[str]:
    """Fixed tokens shaped like `core.pan.PanTokenizer`'s (tok_ + 32 hex digits)."""
    return ["tok_" + hashlib.sha256(f"{salt}-{i}".encode()).hexdigest()[:32] for i in range(n)]


def test_a_filter_built_in_spark_is_the_one_python_builds(spark: SparkSession) -> None:
    """Spark's Murmur3 (`hash` of a long: `hashLong(v, 42)`) is Python's, and the filters
    `bloom_filter_agg` builds are byte for byte the ones `SparkBloomFilter` builds."""
    values = [0, 1, -1, 2**62 + 12_345, -(2**63), 123_456_789_012]
    hashed = spark.createDataFrame([(v,) for v in values], "v long").select(F.hash("v").alias("h"))
    assert [r.h for r in hashed.collect()] == [murmur3_hash_long(v, 42) for v in values]  # seed 42
    p = CompromisedCardParams()
    cards = tokens(600, "round-trip")
    frame = spark.createDataFrame(
        [(t, i % 3) for i, t in enumerate(cards)], "card_token string, g int"
    )
    rows = (
        frame.groupBy("g")
        .agg(bloom_filter_agg(F.expr(TOKEN_KEY_SQL), p.expected_items, p.num_bits).alias("bf"))
        .collect()
    )
    assert sorted(r.g for r in rows) == [0, 1, 2]
    for row in rows:
        built = SparkBloomFilter.from_bytes(bytes(row.bf))
        assert (built.version, built.num_hashes, built.bit_size) == (2, 7, 9_600)
        mine = cards[row.g :: 3]
        python = SparkBloomFilter.create(p.expected_items, p.fpp)
        for token in mine:
            python.put_token(token)
        assert python == built and python.to_bytes() == bytes(row.bf)
        assert all(built.might_contain_token(t) for t in mine)
        others = tokens(5_000, "absent")
        false = sum(built.might_contain_token(t) for t in others) / len(others)
        assert false < p.fpp  # 200 of 1,000 expected cards: far below the sized-for rate
        assert token_key(mine[0]) == int(mine[0][4:19], 16)


def test_both_formats_match_the_jvms_filters(spark: SparkSession) -> None:
    """V1 (`BloomFilterImpl`) and V2 (`BloomFilterImplV2`), made by Spark's own
    `BloomFilter.create` in the JVM (no Spark job), against the Python ones."""
    jvm = spark._jvm
    assert jvm is not None
    sketch = jvm.org.apache.spark.util.sketch
    items = [0, 1, -1, 2**62 + 5, -(2**63), 123_456_789_012_345]
    for version in (1, 2):
        made = sketch.BloomFilter.create(
            getattr(sketch.BloomFilter.Version, f"V{version}"), 100, 1000, 0
        )
        for item in items:
            made.putLong(item)
        out = jvm.java.io.ByteArrayOutputStream()
        made.writeTo(out)
        mine = SparkBloomFilter(version, optimal_num_hashes(100, 1000), bytearray(8 * 16))
        for item in items:
            mine.put_long(item)
        assert mine.to_bytes() == bytes(out.toByteArray())
        assert all(mine.might_contain_long(i) for i in items) and not mine.might_contain_long(7)


@pytest.mark.parametrize("bad", [b"", b"\x00\x00\x00\x03" + bytes(16), b"\x00\x00\x00\x02" * 4])
def test_bytes_that_are_no_filter_are_refused(bad: bytes) -> None:
    with pytest.raises(ValueError):
        SparkBloomFilter.from_bytes(bad)


def test_the_job_publishes_firing_windows_and_evaluate_scores_them(spark: SparkSession) -> None:
    """One Spark job on a fixed-seed run: 300 background uses of 800 cards at 200 merchants
    over an hour; at `term-hot`, 12 distinct cards within 4 minutes (min 10 in 10 minutes) and
    a burst of 12-40 cards at each of 3 more terminals; at `term-cold`, 4 cards. The records
    are the firing windows; `sketches.bloom` scores them against exact membership."""
    rng = np.random.default_rng(35)
    cards = tokens(800, "fleet")
    rows: list[tuple[str, int, str, str, str | None, float]] = [
        (f"b{i}", T0 + int(rng.integers(0, 3_600_000)), cards[int(rng.integers(0, 800))],
         f"m{int(rng.integers(0, 200))}", None, 20.0)
        for i in range(300)
    ]  # fmt: skip
    hot, cold = tokens(12, "hot"), tokens(4, "cold")
    rows += [(f"h{i}", T0 + i * 20_000, t, "m-1", "term-hot", 12.5) for i, t in enumerate(hot)]
    rows += [(f"c{i}", T0 + i * 20_000, t, "m-2", "term-cold", 9.0) for i, t in enumerate(cold)]
    for burst in range(1, 4):
        start = T0 + burst * 900_000
        for j, c in enumerate(rng.choice(800, int(rng.integers(12, 41)), replace=False)):
            rows.append(
                (f"s{burst}-{j}", start + j * 7_000, cards[int(c)], "m-skim", f"t{burst}", 9.0)
            )
    events = pd.DataFrame(rows, columns=list(COLUMNS))
    params = CompromisedCardParams()
    records = spark_windows(spark, events, SETTINGS, params)

    assert {r.terminal_id for r in records} == {"term-hot", "t1", "t2", "t3"}
    first = [r for r in records if r.terminal_id == "term-hot" and r.first_crossing]
    assert len(first) == 1 and first[0].distinct_cards == 12 and first[0].tx_count == 12
    for record in records:
        assert record.window_end - record.window_start == 600_000
        assert (record.fpp, record.expected_items) == (0.01, 1_000)
        if record.terminal_id == "term-hot":
            built = SparkBloomFilter.from_base64(record.filter)
            held = [t for i, t in enumerate(hot) if T0 + i * 20_000 >= record.window_start]
            assert all(built.might_contain_token(t) for t in held)
            assert not any(built.might_contain_token(t) for t in cold)

    block = window_figures(records, events, SETTINGS, params)
    assert block["filters"] == len(records) and block["members"] >= 4 * 12
    assert block["false_negatives"] == 0
    assert block["negatives_tested"] > 1_000
    assert block["observed_error"] <= block["bound"] == 0.01
    assert block["within_bound"] is True


def test_the_fpp_check_fails_for_a_filter_sized_too_small() -> None:
    """The same figures on filters sized for 1 card (64 bits) holding 40: the observed rate
    is far beyond the 0.01 claimed, and a right-sized filter of the same cards is within it
    (`python_filters`, the evaluation's build of the job's filters)."""
    cards = tokens(400, "small")
    burst = [(f"s{i}", T0 + i * 5_000, c, "m-1", "t-1", 5.0) for i, c in enumerate(cards[:40])]
    rest = [(f"o{i}", T0 + i * 5_000, c, f"m{i}", None, 5.0) for i, c in enumerate(cards[40:])]
    events = pd.DataFrame(burst + rest, columns=list(COLUMNS))
    members = exact_members(events, "terminal")
    claimed = CompromisedCardParams()
    tiny = CompromisedCardParams(expected_items=1, fpp=0.5)
    for sized, within in ((tiny, False), (claimed, True)):
        filters = python_filters(events, TerminalParams(), 60_000, "terminal", sized)
        assert filters and {f[0] for f in filters} == {"t-1"}
        block = bloom_figures(filters, members, sorted(set(cards)), claimed)
        assert block["false_negatives"] == 0
        assert block["within_bound"] is within, block
