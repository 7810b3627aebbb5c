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
    token_key,
)
from pipeline.jobs.cards.bloom import bloom_filter_agg, compromised_windows
from pipeline.jobs.cards.config import CardsSettings
from streamsim.evaluate.bloom import bloom_block

SETTINGS = CardsSettings(profiles_topic=None, rules=["compromised_terminal"])
T0 = 1_700_000_400_000  # a 10-minute boundary


def tokens(n: int, salt: str) -> list[str]:
    """Fixed tokens shaped like `core.pan.PanTokenizer`'s (tok_ + 32 hex digits)."""
    return ["tok_" + hashlib.sha256(f"{salt}-{i}".encode()).hexdigest()[:32] for i in range(n)]


def test_spark_murmur3_matches_python(spark: SparkSession) -> None:
    values = [0, 1, -1, 2**62 + 12_345, -(2**63), 123_456_789_012]
    got = spark.createDataFrame([(v,) for v in values], "v long").select(F.hash("v").alias("h"))
    assert [r.h for r in got.collect()] == [murmur3_hash_long(v, 42) for v in values]


def test_a_filter_built_in_spark_is_the_one_python_builds(spark: SparkSession) -> None:
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


def test_the_job_publishes_a_firing_terminal_windows_cards(spark: SparkSession) -> None:
    """12 distinct cards at one terminal within 5 minutes fire (min 10 in 10 minutes); 4 at
    another do not."""
    hot, cold = tokens(12, "hot"), tokens(4, "cold")
    rows = [
        (t, f"h{i}", T0 + i * 20_000, 12.5, "m-1", None, None, False, "term-hot")
        for i, t in enumerate(hot)
    ] + [
        (t, f"c{i}", T0 + i * 20_000, 9.0, "m-2", None, None, False, "term-cold")
        for i, t in enumerate(cold)
    ]
    ddl = (
        "card_token string, event_id string, event_time long, amount double, "
        "merchant_id string, lat double, lon double, card_present boolean, terminal_id string"
    )
    tx = spark.createDataFrame(rows, ddl).withColumn("event_ts", F.timestamp_millis("event_time"))
    out = compromised_windows(tx, SETTINGS).collect()
    assert {r.terminal_id for r in out} == {"term-hot"}
    first = [r for r in out if r.first_crossing]
    assert len(first) == 1 and first[0].distinct_cards == 12 and first[0].tx_count == 12
    for record in out:
        assert record.window_end - record.window_start == 600_000
        built = SparkBloomFilter.from_base64(record.filter)
        held = [t for i, t in enumerate(hot) if rows[i][2] >= record.window_start]
        assert all(built.might_contain_token(t) for t in held)
        assert not any(built.might_contain_token(t) for t in cold)
        assert (record.fpp, record.expected_items) == (0.01, 1_000)


@pytest.mark.parametrize("bad", [b"", b"\x00\x00\x00\x03" + bytes(16), b"\x00\x00\x00\x02" * 4])
def test_bytes_that_are_no_filter_are_refused(bad: bytes) -> None:
    with pytest.raises(ValueError):
        SparkBloomFilter.from_bytes(bad)


def test_the_evaluate_bloom_entry_is_within_its_fpp(spark: SparkSession) -> None:
    """`sketches.bloom` on a fixed-seed run: 6 terminals with a burst of 12-40 cards in 5
    minutes among 3,000 background uses of 800 cards at 40 terminals over 2 hours."""
    rng = np.random.default_rng(35)
    cards = tokens(800, "fleet")
    rows = []
    for i in range(3_000):
        rows.append(
            (f"b{i}", T0 + int(rng.integers(0, 7_200_000)), cards[int(rng.integers(0, 800))],
             f"m{int(rng.integers(0, 40))}", None, 20.0)
        )  # fmt: skip
    for burst in range(6):
        start = T0 + burst * 1_200_000
        for j, c in enumerate(rng.choice(800, int(rng.integers(12, 41)), replace=False)):
            rows.append(
                (f"s{burst}-{j}", start + j * 7_000, cards[int(c)], "m-skim", f"t{burst}", 9.0)
            )
    events = pd.DataFrame(
        rows,
        columns=["event_id", "event_time", "card_token", "merchant_id", "terminal_id", "amount"],
    )
    block = bloom_block(spark, events, SETTINGS)
    assert block["filters"] >= 6 and block["members"] >= 6 * 12
    assert block["false_negatives"] == 0
    assert block["negatives_tested"] > 1_000
    assert block["observed_error"] <= block["bound"] == 0.01
    assert block["within_bound"] is True
