"""Card fraud on the transaction stream: per-card features and four rules from `detectors/`.

source: `cards.transactions` (raw POS) or `cards.activity` (the endpoint's decisions), JSON
  -> parse; malformed records -> dead-letter topic with the reason
  -> watermark on event time, duplicates (same event_id) dropped within the watermark
  -> features: per-card tumbling and sliding windows (count, sum, small count, approx distinct
     merchants and countries)                                   -> `aggregates.card-features`
  -> alerts, each rule from `detectors/`:
       velocity (card testing): per-card sliding windows in Spark SQL, `velocity_window_alerts`
       compromised terminal: per-merchant approx_count_distinct(card) on sliding windows,
         `terminal_window_alerts` (each burst alerts once: `detectors.features.first_crossing`)
       impossible travel and account takeover: `TravelState` / `SpendingState` per card in
         `transformWithStateInPandas`, fed in event-time order at the watermark
                                                     -> `alerts` topic + `<lake>/alerts/`

Queries (`streamsim pipeline run card-velocity` prints each one's mode):
- `card-velocity.deadletter`: stateless, so Real-time Mode (`card_velocity.deadletter_trigger`).
- `card-velocity.features`: windowed aggregation, micro-batch, Kafka sink, append mode.
- `card-velocity.alerts`: windows + state, micro-batch, `AlertSink` (Kafka + lake) per batch.
Window results are emitted once, when the watermark closes the window (append mode), so an
alert is final and its deterministic id never changes.
"""

from __future__ import annotations

from functools import reduce
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from core.config import StackConfig
from core.contracts import CARD_TRANSACTION
from core.kafka import ensure_topics
from detectors import ALERT_SPARK_DDL
from pipeline.alerts_sink import AlertSink
from pipeline.config import PipelineConfig
from pipeline.jobs.card_velocity.config import CardVelocitySettings
from pipeline.jobs.card_velocity.state import INPUT_COLUMNS, CardRulesProcessor
from pipeline.jobs.card_velocity.window_rules import terminal_alert_rows, velocity_alert_rows
from pipeline.jobs.card_velocity.windows import (
    Transactions,
    card_features,
    merchant_windows,
    velocity_windows,
)
from pipeline.kafka_io import (
    as_kafka_record,
    deadletter_records,
    input_partitions,
    parse_events,
    read_kafka,
    write_kafka,
)
from pipeline.session import use_rocksdb_state
from pipeline.settings import duration_ms
from pipeline.triggers import output_mode, query_trigger, realtime_fits, start_query

NAME = "card-velocity"

#: The fields this job reads from `cards.transaction/1` and `cards.activity/1` records.
TRANSACTION_SCHEMA = CARD_TRANSACTION.spark_schema(exclude=("card_last4", "seq"))
#: Beyond event_id and event_time, a transaction without these goes to the dead-letter topic.
REQUIRED = ("card_token", "amount")


def transactions(events: DataFrame, watermark: str) -> DataFrame:
    """Watermarked transactions, each event id once within the watermark."""
    return events.withWatermark("event_ts", watermark).dropDuplicatesWithinWatermark(["event_id"])


def rule_alerts(tx: Transactions, settings: CardVelocitySettings) -> DataFrame:
    """The alert rows (`ALERT_SPARK_DDL`) of every enabled rule, as one stream.

    Each rule reads its own `tx()` (see `pipeline.jobs.card_velocity.windows` for why)."""
    rules, rsd, slide = set(settings.rules), settings.distinct_rsd, settings.rule_slide_ms
    streams = []
    if "velocity" in rules:
        windows = velocity_windows(tx(), settings.velocity, rsd, slide)
        streams.append(velocity_alert_rows(windows, settings.velocity))
    if "compromised_terminal" in rules:
        windows = merchant_windows(tx(), settings.terminal, rsd, slide)
        streams.append(terminal_alert_rows(windows, settings.terminal))
    travel = settings.travel if "impossible_travel" in rules else None
    spending = settings.spending if "spending_anomaly" in rules else None
    if travel is not None or spending is not None:
        ttl = None if settings.card_state_ttl is None else duration_ms(settings.card_state_ttl)
        per_card = tx().select("card_token", *INPUT_COLUMNS, "event_ts").groupBy("card_token")
        streams.append(
            per_card.transformWithStateInPandas(
                CardRulesProcessor(travel, spending, ttl), ALERT_SPARK_DDL, "Append", "EventTime"
            )
        )
    return reduce(DataFrame.unionByName, streams)


def start(spark: SparkSession, stack: StackConfig, cfg: PipelineConfig) -> list[StreamingQuery]:
    settings = cfg.card_velocity
    checkpoints = stack.dirs.checkpoints / NAME
    ensure_topics(stack, [settings.features_topic])
    use_rocksdb_state(spark)

    raw = read_kafka(
        spark, stack, cfg.input_topics, cfg.starting_offsets, cfg.max_offsets_per_trigger
    )
    events, rejects = parse_events(raw, TRANSACTION_SCHEMA, REQUIRED)

    def tx() -> DataFrame:
        return transactions(events, cfg.watermark)

    stateful = query_trigger(cfg.trigger, stateful=True)
    stateless, note = realtime_fits(
        query_trigger(settings.deadletter_trigger, stateful=False),
        partitions=input_partitions(stack, cfg.input_topics),
        slots=spark.sparkContext.defaultParallelism,
    )

    deadletter = write_kafka(
        deadletter_records(rejects, NAME),
        stack,
        cfg.deadletter_topic,
        str(checkpoints / "deadletter"),
        output_mode(stateless),
    )
    features = write_kafka(
        as_kafka_record(
            F.col("card_token"),
            card_features(
                tx, settings.feature_windows, settings.velocity.small_amount, settings.distinct_rsd
            ),
        ),
        stack,
        settings.features_topic,
        str(checkpoints / "features"),
    )
    alerts_checkpoint = Path(checkpoints / "alerts")
    sink = AlertSink(stack, cfg.output_topic, NAME, alerts_checkpoint, stack.dirs.lake)
    alerts = (
        rule_alerts(tx, settings)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(alerts_checkpoint))
        .outputMode("append")
    )
    return [
        start_query(deadletter, f"{NAME}.deadletter", stateless, note),
        start_query(features, f"{NAME}.features", stateful),
        start_query(alerts, f"{NAME}.alerts", stateful),
    ]
