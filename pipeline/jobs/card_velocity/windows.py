"""Card-transaction window features in Spark SQL (`aggregates.card-features`).

Spark computes every aggregate natively (`window()`, `count`, `sum`, `approx_count_distinct`).
The fraud rules do not run here: they share one stateful operator (`state.py`). Inputs are
de-duplicated, watermarked transactions with `card_token`, `merchant_id`, `country`, `amount`,
`event_id`, `event_time` (epoch ms) and `event_ts` (its timestamp). Window bounds come out as epoch
ms.

`card_features` takes a *factory* of that stream (`Transactions`) and builds one per window
spec: in Spark 4.2, when one `withWatermark` + `dropDuplicatesWithinWatermark` node feeds
several unioned aggregations, only the first aggregation ever sees the watermark advance (the
others never emit in append mode); a watermark and dedup of their own per branch works.

    card_features(tx, windows, small_amount=5.0)   # -> aggregates.card-features
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.event_windows import event_window as _window
from pipeline.event_windows import window_bounds as _bounds
from pipeline.settings import WindowSpec

FEATURES_SCHEMA = "aggregates.card-features/1"

#: Builds a fresh watermarked, de-duplicated transaction stream (one per unioned branch).
Transactions = Callable[[], DataFrame]

__all__ = ["Transactions", "card_features"]


def _small_count(small_amount: float) -> Column:
    return F.sum(F.when(F.col("amount") < F.lit(small_amount), 1).otherwise(0))


def card_features(
    tx: Transactions, windows: list[WindowSpec], small_amount: float, rsd: float = 0.05
) -> DataFrame:
    """One row per card per window of every spec: counts, sums, distinct merchants/countries.

    Each spec is its own aggregation (a union of them), so tumbling and sliding windows of
    different lengths are emitted side by side, each when the watermark closes it.
    """
    per_spec = []
    for spec in windows:
        rows = (
            tx()
            .groupBy(F.col("card_token"), _window(spec.length_ms, spec.slide_ms))
            .agg(
                F.count(F.lit(1)).alias("tx_count"),
                F.sum("amount").alias("amount_sum"),
                _small_count(small_amount).alias("small_count"),
                F.approx_count_distinct("merchant_id", rsd).alias("distinct_merchants"),
                F.approx_count_distinct("country", rsd).alias("distinct_countries"),
                F.max("event_time").alias("last_event_time"),
            )
            .select(
                F.lit(FEATURES_SCHEMA).alias("schema"),
                "card_token",
                *_bounds(),
                F.lit(spec.length_ms // 1000).alias("window_s"),
                F.lit(spec.slide_ms // 1000).alias("slide_s"),
                "tx_count",
                F.round("amount_sum", 6).alias("amount_sum"),
                F.col("small_count").cast("long").alias("small_count"),
                "distinct_merchants",
                "distinct_countries",
                "last_event_time",
            )
        )
        per_spec.append(rows)
    return reduce(DataFrame.unionByName, per_spec)
