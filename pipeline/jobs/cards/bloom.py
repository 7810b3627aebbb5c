"""Compromised cards: a Bloom filter of the cards seen at a terminal while the
compromised-terminal rule fires on it, built with Spark's `bloom_filter_agg` and published to
`cards.compromised-cards` (`core.contracts.compromised`; the fraud endpoint applies them,
`api.fraud.compromised`). Parameters: `detectors.cards.bloom.CompromisedCardParams`.

One query, `cards.compromised-cards`, beside the alert queries of either rules form
(`cards.rules_form` python or engine) when `cards.compromised_cards_topic` is set and
`compromised_terminal` is among the rules:
the terminal rows of the engine form's windows (`engine.window_rows`: per terminal,
`terminal_key`, windows of `TerminalParams.window_s` sliding by `rule_slide`), grouped by
(terminal, window): `approx_count_distinct` of the cards now and before the window's last slide,
the count, and `bloom_filter_agg` of each card token's key (`TOKEN_KEY_SQL`: the token, never
the PAN). Each window the rule fires on (`terminal_fires`; `first_crossing` marks the one it
alerts on) is one record, emitted when the watermark closes it. Every firing window of a
burst is published, not only the first: a card that pays at the terminal later in the burst is
as exposed.

Spark registers `bloom_filter_agg` for its runtime join filters only (no SQL name, no
`pyspark.sql.functions` entry in 4.2): `bloom_filter_agg` here builds the catalyst
`BloomFilterAggregate` through the JVM (classic sessions only).

    windows = compromised_windows(tx, cfg.cards)        # batch or streaming
    queries = start(spark, stack, cfg, tx)               # [] without a topic or the rule
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from core.config import StackConfig
from core.contracts.compromised import SCHEMA
from core.kafka import ensure_topics
from detectors.cards.bloom import TOKEN_KEY_SQL, CompromisedCardParams
from detectors.cards.terminal import terminal_fires
from pipeline.config import PipelineConfig
from pipeline.event_windows import window_bounds
from pipeline.jobs.cards.config import CardsSettings
from pipeline.jobs.cards.engine import TERMINAL, window_rows
from pipeline.kafka_io import as_kafka_record, write_kafka
from pipeline.session import scheduler_pool
from pipeline.triggers import query_trigger, start_query

QUERY = "cards.compromised-cards"
RULE = "compromised_terminal"


def bloom_filter_agg(column: Column, expected_items: int, num_bits: int) -> Column:
    """Spark's `BloomFilterAggregate` over a long column: the serialized filter (binary; null
    when every value was null), sized as `BloomFilter.create(expected_items, num_bits)`."""
    from pyspark.sql.classic.column import Column as ClassicColumn

    spark = SparkSession.getActiveSession()
    if spark is None:
        raise RuntimeError("bloom_filter_agg needs an active Spark session")
    jvm = spark._jvm
    assert jvm is not None
    utils = jvm.org.apache.spark.sql.classic.ExpressionUtils
    aggregate = jvm.org.apache.spark.sql.catalyst.expressions.aggregate.BloomFilterAggregate(
        utils.expression(column._jc),
        utils.expression(F.lit(expected_items).cast("bigint")._jc),
        utils.expression(F.lit(num_bits).cast("bigint")._jc),
    )
    return ClassicColumn(utils.column(aggregate.toAggregateExpression()))


def compromised_windows(
    tx: DataFrame, settings: CardsSettings, params: CompromisedCardParams | None = None
) -> DataFrame:
    """The records (`COMPROMISED_CARDS` less `job` / `published_at`) of the terminal windows
    the compromised-terminal rule fires on, over de-duplicated transactions (`event_ts`
    watermarked if streaming)."""
    p = params or CompromisedCardParams()
    terminal = settings.terminal
    rows = window_rows(tx, settings.model_copy(update={"rules": [RULE]})).where(
        F.col("kind") == TERMINAL
    )
    card = F.coalesce(F.col("other"), F.lit(""))
    prior = F.col("prior")
    windows = rows.groupBy(F.col("entity").alias("terminal_id"), "window").agg(
        F.approx_count_distinct(card, settings.distinct_rsd).alias("distinct_cards"),
        F.approx_count_distinct(F.when(prior, card), settings.distinct_rsd).alias("prior"),
        F.count(F.lit(1)).alias("tx_count"),
        bloom_filter_agg(
            F.expr(TOKEN_KEY_SQL.replace("card_token", "other")), p.expected_items, p.num_bits
        ).alias("bloom"),
    )
    fires = terminal_fires(F.col("distinct_cards"), terminal)
    return windows.where(fires & F.col("bloom").isNotNull()).select(
        F.lit(SCHEMA).alias("schema"),
        "terminal_id",
        *window_bounds(),
        F.col("distinct_cards").cast("long").alias("distinct_cards"),
        F.col("tx_count").cast("long").alias("tx_count"),
        (~terminal_fires(F.col("prior"), terminal)).alias("first_crossing"),
        F.base64("bloom").alias("filter"),
        F.lit("token_key").alias("item"),
        F.lit(p.fpp).alias("fpp"),
        F.lit(p.expected_items).cast("long").alias("expected_items"),
        F.lit(p.num_bits).cast("long").alias("num_bits"),
    )


def start(
    spark: SparkSession, stack: StackConfig, cfg: PipelineConfig, tx: DataFrame
) -> list[StreamingQuery]:
    """The `cards.compromised-cards` query on the job's de-duplicated, watermarked
    transactions (none without `compromised_cards_topic` or the compromised-terminal rule)."""
    topic = cfg.cards.compromised_cards_topic
    if topic is None or RULE not in cfg.cards.rules:
        return []
    ensure_topics(stack, [topic])
    records = compromised_windows(tx, cfg.cards).select(
        "*", F.lit("cards").alias("job"), F.unix_millis(F.current_timestamp()).alias("published_at")
    )
    writer = write_kafka(
        as_kafka_record(F.col("terminal_id"), records),
        stack,
        topic,
        str(stack.dirs.checkpoints / "cards" / "compromised-cards"),
    )
    with scheduler_pool(spark, "aggregates"):
        return [start_query(writer, QUERY, query_trigger(cfg.trigger, stateful=True))]
