"""Card-transaction window aggregates in Spark SQL: per-card features and the rules' inputs.

Spark computes every aggregate natively (`window()`, `count`, `sum`, `approx_count_distinct`); the
detectors only decide on the rows (see `pipeline.jobs.card_velocity.window_rules`). Inputs are
de-duplicated, watermarked transactions with `card_token`, `merchant_id`, `country`, `amount`,
`event_id`, `event_time` (epoch ms) and `event_ts` (its timestamp). Window bounds come out as epoch
ms.

`card_features` takes a *factory* of that stream (`Transactions`) and builds one per window
spec: in Spark 4.2, when one `withWatermark` + `dropDuplicatesWithinWatermark` node feeds
several unioned aggregations, only the first aggregation ever sees the watermark advance (the
others never emit in append mode); a watermark and dedup of their own per branch works.

    card_features(tx, windows, small_amount=5.0)   # -> aggregates.card-features
    velocity_windows(tx, VelocityParams(), slide_ms=60_000)   # -> velocity_window_alerts
    merchant_windows(tx, TerminalParams(), slide_ms=60_000)   # -> terminal_window_alerts

The rules' windows slide (a tumbling boundary would split a burst below the threshold); each
window also carries its features over the events before its last slide (`prior_*`), so the
rule fires once per burst (`detectors.features.first_crossing`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from detectors import TerminalParams, VelocityParams
from pipeline.event_windows import event_window as _window
from pipeline.event_windows import spark_interval
from pipeline.event_windows import window_bounds as _bounds
from pipeline.settings import WindowSpec

FEATURES_SCHEMA = "aggregates.card-features/1"

#: Builds a fresh watermarked, de-duplicated transaction stream (one per unioned branch).
Transactions = Callable[[], DataFrame]

__all__ = [
    "Transactions",
    "card_features",
    "merchant_windows",
    "spark_interval",
    "velocity_windows",
]


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


def _with_bounds(windows: DataFrame) -> DataFrame:
    """entity_id, window_start, window_end, then the aggregates."""
    aggregates = [c for c in windows.columns if c not in ("entity_id", "window")]
    return windows.select("entity_id", *_bounds(), *aggregates)


def _before_last_slide(column: str, slide_ms: int) -> Column:
    """`column` for the window's events before its last slide, else null."""
    cutoff = F.unix_millis(F.col("window.end")) - F.lit(slide_ms)
    return F.when(F.col("event_time") < cutoff, F.col(column))


def velocity_windows(
    tx: DataFrame, params: VelocityParams, rsd: float = 0.05, slide_ms: int | None = None
) -> DataFrame:
    """Per-card windows of `params.window_s` sliding by `slide_ms` (unset: tumbling): the
    columns `velocity_window_alerts` takes (entity_id, window bounds, tx_count, small_count,
    amount_sum, distinct_merchants, last_event_time, event_ids; `prior_*` when sliding)."""
    window_ms = params.window_ms
    small = (F.col("amount") < F.lit(params.small_amount)).cast("long")
    aggregates = [
        F.count(F.lit(1)).alias("tx_count"),
        F.sum("small").alias("small_count"),
        F.sum("amount").alias("amount_sum"),
        F.approx_count_distinct("merchant_id", rsd).alias("distinct_merchants"),
        F.max("event_time").alias("last_event_time"),
        F.collect_list("event_id").alias("event_ids"),
    ]
    if slide_ms is not None and slide_ms < window_ms:
        aggregates += [
            F.count(_before_last_slide("event_id", slide_ms)).alias("prior_tx_count"),
            F.sum(_before_last_slide("small", slide_ms)).alias("prior_small_count"),
            F.approx_count_distinct(_before_last_slide("merchant_id", slide_ms), rsd).alias(
                "prior_distinct_merchants"
            ),
        ]
    per_card = tx.withColumn("small", small).groupBy(
        F.col("card_token").alias("entity_id"), _window(window_ms, slide_ms)
    )
    return _with_bounds(per_card.agg(*aggregates))


def merchant_windows(
    tx: DataFrame, params: TerminalParams, rsd: float = 0.05, slide_ms: int | None = None
) -> DataFrame:
    """Per-merchant windows of `params.window_s` sliding by `slide_ms` (unset: tumbling):
    approx distinct cards, the columns `terminal_window_alerts` takes."""
    window_ms = max(1, round(params.window_s * 1000))
    aggregates = [
        F.approx_count_distinct("card_token", rsd).alias("distinct_cards"),
        F.count(F.lit(1)).alias("tx_count"),
        F.max("event_time").alias("last_event_time"),
        F.collect_list("event_id").alias("event_ids"),
    ]
    if slide_ms is not None and slide_ms < window_ms:
        prior_cards = _before_last_slide("card_token", slide_ms)
        aggregates.append(F.approx_count_distinct(prior_cards, rsd).alias("prior_distinct_cards"))
    per_merchant = tx.where(F.col("merchant_id").isNotNull()).groupBy(
        F.col("merchant_id").alias("entity_id"), _window(window_ms, slide_ms)
    )
    return _with_bounds(per_merchant.agg(*aggregates))
