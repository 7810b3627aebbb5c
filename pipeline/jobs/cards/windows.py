"""Card-transaction window features in Spark SQL (`aggregates.card-features`).

Spark computes every aggregate natively (`count`, `sum`, `approx_count_distinct`). The fraud
rules do not run here: they share one stateful operator (`state.py`). Inputs are de-duplicated,
watermarked transactions with `card_token`, `merchant_id`, `country`, `amount`, `event_id`,
`event_time` (epoch ms) and `event_ts` (its timestamp). Window bounds come out as epoch ms.

Every spec's windows come from one aggregation: each transaction becomes a row per window
that holds it (`explode_spec_windows`: three for the default 1-minute, 10-minute and 1-hour
tumbling specs), grouped by card, spec and window. The window column carries the
transactions' watermark, as `window()`'s does, so each window is emitted and evicted once the
watermark passes its end. So the query reads, parses and de-duplicates its input once (an
aggregation per spec, unioned, needs a watermarked, de-duplicated stream each: Spark 4.2
advances the watermark of only the first of several aggregations fed by one watermark node).

    card_features(tx, windows, small_amount=5.0)   # -> aggregates.card-features
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.event_windows import explode_spec_windows, window_bounds
from pipeline.settings import WindowSpec

FEATURES_SCHEMA = "aggregates.card-features/1"

__all__ = ["card_features"]


def _small_count(small_amount: float) -> Column:
    return F.sum(F.when(F.col("amount") < F.lit(small_amount), 1).otherwise(0))


def card_features(
    tx: DataFrame, windows: Sequence[WindowSpec], small_amount: float, rsd: float = 0.05
) -> DataFrame:
    """One row per card per window of every spec: counts, sums, distinct merchants/countries,
    each emitted when the watermark closes its window (see the module docstring)."""
    rows = tx.select("card_token", "merchant_id", "country", "amount", "event_time", "event_ts")
    return (
        explode_spec_windows(rows, windows)
        .groupBy("card_token", "window_s", "slide_s", "window")
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
            *window_bounds(),
            "window_s",
            "slide_s",
            "tx_count",
            F.round("amount_sum", 6).alias("amount_sum"),
            F.col("small_count").cast("long").alias("small_count"),
            "distinct_merchants",
            "distinct_countries",
            "last_event_time",
        )
    )
