"""Card fraud on the transaction stream: per-card features and four rules from `detectors/`.

source: `cards.transactions` (raw POS) or `cards.activity` (the endpoint's decisions), JSON
  -> parse; malformed records -> dead-letter topic with the reason
  -> watermark on event time, duplicates (same event_id) dropped within the watermark
  -> features: per-card tumbling and sliding windows (count, sum, small count, approx distinct
     merchants and countries)                                   -> `aggregates.card-features`
  -> alerts: ONE stateful operator for every rule (`CardBucketProcessor`): each transaction
     is a card row and a merchant row, grouped by a bucket of entities with compact state;
     impossible travel, account takeover and velocity (card testing: sliding windows, the
     first crossing of each burst) per card, compromised terminal per terminal (online: per
     merchant; `terminal_key`), all from `detectors/`, fed in event-time order at the
     watermark                                                  -> `alerts` topic + `<lake>/alerts/`
profiles: `cards.profiles` (compacted, `cards.profiles_topic`), JSON -> parse;
  malformed -> dead-letter topic -> rows of kind "p" into the same stateful operator, in the
  bucket of their card: the spending rule judges each purchase against the card's profile
  (`check_profile_spending`, as the fraud endpoint does)

Rules form (`cards.rules_form`): `python` (the default) runs every rule in that one Python
operator. `engine` runs three of them in Spark's engine (`pipeline.jobs.cards.engine`), each
from its detector's params and predicate, with no Python worker:
  -> velocity + compromised terminal: ONE sliding-window aggregation over card rows and
     terminal rows (count, count_if small, sum, approx_count_distinct, the same before the
     window's last slide: first crossing of a burst)             -> `cards.alerts-windows`
  -> impossible travel: a time-bounded self-join of each card's located uses, haversine as a
     Column expression                                          -> `cards.alerts-travel`
  -> spending (account takeover) stays in the Python operator, `cards.alerts`, fed only the
     card rows (no terminal rows) and the profiles: it judges each purchase against its card's
     issuer profile (a per-card map of category counts, typical amount and known devices,
     applied on arrival), which no built-in aggregate or join keeps (a stream-static join
     re-reads the whole profiles topic every batch, see below).
The engine form's queries each read and parse the topic themselves: in Spark 4.2 only the
first of several stateful operators fed by one watermark sees it advance (see below), and a
join's watermark is its own. Differences by design (conformance corpus
`tests/conformance/cards.py`): travel judges every pair within its bound, not only
consecutive ones (more alerts on the same cards), with the sphere's distance; distinct counts
are HyperLogLog++ estimates.

Measured (`streamsim bench pipeline --job cards --events 100000`, 2 cores shared with other
work; `--pipeline` selects the form):
- python form (load average 13-22): 1,362 tx/s for the whole job against a floor (Kafka
  read + parse + one window) of 11,582 (0.12x), alert p99 30.1 s at the paced load, peak RSS
  7.5 GB; per query `cards.alerts` (the one Python operator, all four rules) 1,366 tx/s:
  it sets the pace.
- python form again, quieter (load average 2.7 before, 3.1 after): 3,875 tx/s against a
  floor of 22,332 (0.17x), alert p99 2.1 s, peak RSS 5.5 GB; `cards.alerts` 3,881 tx/s.
- engine form with the memory state store: `cards.alerts-windows` failed with Spark's
  UNABLE_TO_ACQUIRE_MEMORY in its aggregation (each transaction is 20 window rows, each with
  two HyperLogLog++ buffers and the window's event ids, all state in the JVM heap).
- engine form with `state_store: rocksdb` (load average 5-8 at its end): 327 tx/s against a
  floor of 16,415 (0.02x), alert p99 28.5 s (p50 4.4 s, python 26.4 s), peak RSS 7.6 GB;
  per query `cards.alerts` (spending only) 291, `cards.alerts-windows` 327,
  `cards.alerts-travel` 302, `cards.features` 429 tx/s: five queries, each reading Kafka,
  share two cores. Travel's every-pair join raised 3,991 alerts for 400 planted pairs in the
  paced phase (the same cards; the python form: 400).
So the python form stays the default: the engine form as built is slower, not faster.
The remaining Python stateful operator in the engine form is `cards.alerts`
(`CardBucketProcessor` / `bucket_rules`), spending only.

Why not a stream-static join with the topic read as a table: a static side is read once per
batch (all of it: 20,000 profiles per demo run, more with older runs' in the compacted topic),
and a profile published after the query started (the next run's) would need the table re-read
or cached and refreshed; fed as rows, each profile crosses once, into the state the operator
already reads and writes per bucket, at no extra state call.

The alerts query reads and parses Kafka once and has one de-duplication and one stateful
operator after it (Spark 4.2 lets only the first of several aggregations fed by one watermark
see it advance, so rule branches of their own each needed their own read; one operator needs
none). See `pipeline.jobs.cards.state` for the state layout and its per-batch state
calls.

Queries (`streamsim pipeline run cards` prints each one's mode):
- `cards.deadletter`: stateless, so Real-time Mode (`cards.deadletter_trigger`).
- `cards.features`: windowed aggregations, micro-batch (`features_trigger`), Kafka
  sink, append mode, FAIR pool `aggregates`: each window once, `final: true`.
- `cards.features-provisional` (with `provisional_features`): the same aggregation in
  update mode into the same topic, `final: false`: a window's value so far, each batch that
  changes it, corrected as stragglers land, before its final row (Spark's update mode emits
  nothing when the watermark evicts a window, so the final row is the append query's).
- `cards.alerts`: one stateful operator, micro-batch, `AlertSink` (Kafka + lake), FAIR
  pool `alerts`: its batches take the next free core rather than queue behind a features
  batch (the dead letters have a pool of their own, see `fairscheduler.xml`). It reads the
  transactions and, with profiles, the profiles topic. Uses its operator refuses as late go
  to the metrics topic as `cards.late-drops` (`pipeline.late_drops`).
- `cards.sketches` (with `cards.sketches.enabled`): per tumbling window the busiest
  terminals and merchants (Count-Min) and the distinct cards per terminal (HyperLogLog), in a
  `foreachBatch` sink that keeps the open windows' sketches (`pipeline.sketches`), FAIR pool
  `aggregates`. It reads and parses the topic itself; off in `bench pipeline`.
- `cards.compromised-cards` (with `cards.compromised_cards_topic`): per terminal window the
  compromised-terminal rule fires on, a Bloom filter of its cards' tokens
  (`bloom_filter_agg`, `pipeline.jobs.cards.bloom`) for the fraud endpoint; micro-batch,
  append, FAIR pool `aggregates`; off in `bench pipeline`.
- `cards.profiles-deadletter` (with profiles): malformed profiles to the dead-letter
  topic; stateless micro-batches at the dead-letter trigger's interval (Real-time Mode would
  hold a task slot for a topic that is written once per run).
Window results are emitted once, when the watermark closes the window, so an alert is final
and its deterministic id never changes.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import ArrayType, LongType, MapType, StringType, StructField, StructType

from core.config import StackConfig
from core.contracts import CARD_PROFILE, CARD_TRANSACTION
from core.kafka import ensure_topics
from core.kafka.compacted import ensure_compacted
from pipeline.alerts_sink import AlertSink
from pipeline.config import PipelineConfig
from pipeline.group_state import STATE_DDL
from pipeline.jobs.cards import bloom, sketches
from pipeline.jobs.cards.config import CardsSettings
from pipeline.jobs.cards.engine import travel_alerts, window_alerts
from pipeline.jobs.cards.state import CardBucketProcessor, CardRuleParams, bucket_rules
from pipeline.jobs.cards.windows import card_features
from pipeline.kafka_io import (
    as_kafka_record,
    deadletter_records,
    input_partitions,
    parse_events,
    read_kafka,
    write_kafka,
)
from pipeline.late_drops import OUTPUT_DDL, counting_sink
from pipeline.rules.alert_rows import with_alert_ids
from pipeline.session import scheduler_pool, use_state_store
from pipeline.settings import TriggerSettings, duration_ms
from pipeline.triggers import MICROBATCH, output_mode, query_trigger, realtime_fits, start_query

NAME = "cards"
#: The engine form's queries (`cards.rules_form: engine`), beside `cards.alerts`.
WINDOWS_QUERY, TRAVEL_QUERY = f"{NAME}.alerts-windows", f"{NAME}.alerts-travel"
#: The rules that keep the Python operator in the engine form.
PYTHON_RULES = ("spending_anomaly",)
#: The update-mode variant of the features query (`cards.provisional_features`).
PROVISIONAL_QUERY = f"{NAME}.features-provisional"

#: The fields this job reads from `cards.transaction/1` and `cards.activity/1` records.
TRANSACTION_SCHEMA = CARD_TRANSACTION.spark_schema(exclude=("card_last4", "seq"))
#: Beyond event_id and event_time, a transaction without these goes to the dead-letter topic.
REQUIRED = ("card_token", "amount")
#: The fields this job reads from `cards.profile/1` records: the spending rule's features.
#: `category_counts` (JSON in the contract) parses as a map MCC -> purchases: a record whose
#: counts are not integers parses it as null, and is dead-lettered.
#: `devices` (the holder's known device ids) is optional: a profile without them knows none.
PROFILE_FIELDS = ("card_token", "typical_amount", "history_count", "category_counts")
PROFILE_SCHEMA = StructType(
    [
        *CARD_PROFILE.spark_schema(
            names=("schema", "event_id", "event_time", *PROFILE_FIELDS[:-1])
        ).fields,
        StructField(PROFILE_FIELDS[-1], MapType(StringType(), LongType())),
        StructField("devices", ArrayType(StringType())),
    ]
)


def profile_checks() -> list[tuple[Column, str]]:
    """Profiles the rule cannot use, beyond missing fields: dead-lettered with these reasons
    (a function: a Column needs an active Spark session)."""
    return [
        (~F.col("event.schema").eqNullSafe(CARD_PROFILE.id), f"not a {CARD_PROFILE.id} record"),
        (F.col("event.history_count") < 0, "negative history_count"),
        (
            (F.col("event.typical_amount") < 0) | F.isnan("event.typical_amount"),
            "typical_amount not a number >= 0",
        ),
    ]


def transactions(events: DataFrame, watermark: str) -> DataFrame:
    """Watermarked transactions, each event id once within the watermark."""
    return events.withWatermark("event_ts", watermark).dropDuplicatesWithinWatermark(["event_id"])


def features_records(tx: DataFrame, settings: CardsSettings, final: bool) -> DataFrame:
    """The features topic's records: `final` true for the append-mode query's rows (a window
    once the watermark has passed its end), false for the update-mode variant's provisional
    rows (the window so far, each batch that changes it)."""
    features = card_features(
        tx, settings.feature_windows, settings.velocity.small_amount, settings.distinct_rsd
    )
    return as_kafka_record(F.col("card_token"), features.withColumn("final", F.lit(final)))


def features_trigger(cfg: PipelineConfig) -> TriggerSettings:
    """The features query's own trigger, or the job's when the job drains its input
    (AvailableNow), so that every query of a drain ends."""
    if cfg.trigger.mode == "available_now":
        return cfg.trigger
    return cfg.cards.features_trigger


def parse_profiles(raw: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Raw `cards.profiles` records -> (profiles, rejects with their reason)."""
    return parse_events(raw, PROFILE_SCHEMA, PROFILE_FIELDS, checks=profile_checks())


def profiles_deadletter_trigger(cfg: PipelineConfig) -> TriggerSettings:
    """Micro-batches at the dead-letter trigger's interval, or the job's trigger when the job
    drains its input (AvailableNow)."""
    if cfg.trigger.mode == "available_now":
        return cfg.trigger
    return MICROBATCH.model_copy(update={"interval": cfg.cards.deadletter_trigger.interval})


def rule_params(settings: CardsSettings, watermark: str, profiles: bool = False) -> CardRuleParams:
    """The enabled rules' thresholds for `CardBucketProcessor`, which releases uses up to a
    batch's newest less `watermark` (the query's delay); `profiles`: profile rows are fed, and
    the spending rule judges against them."""
    rules = set(settings.rules)
    ttl = settings.card_state_ttl
    return CardRuleParams(
        travel=settings.travel if "impossible_travel" in rules else None,
        spending=settings.spending if "spending_anomaly" in rules else None,
        velocity=settings.velocity if "velocity" in rules else None,
        terminal=settings.terminal if "compromised_terminal" in rules else None,
        slide_ms=settings.rule_slide_ms,
        ttl_ms=None if ttl is None else duration_ms(ttl),
        delay_ms=duration_ms(watermark),
        profiles=profiles,
    )


def rule_alerts(
    tx: DataFrame, settings: CardsSettings, watermark: str, profiles: DataFrame | None = None
) -> DataFrame:
    """The alert rows of every enabled rule, from one stateful operator, and rows counting the
    uses it refused as late (`late_drops.OUTPUT_DDL`; `LateDrops` takes them out).

    Each transaction becomes a card row and a merchant row (`kind` c / m; the "merchant" is
    what `_terminal` keys), grouped by a bucket of `hash(kind, entity)`: `CardBucketProcessor`
    runs the per-card rules and the per-merchant rule on them (see
    `pipeline.jobs.cards.state`). `profiles` (parsed `cards.profile/1` records): each
    becomes a row of kind p in its card's bucket, and the spending rule judges against them;
    None: against the card's history in the stream."""
    params = rule_params(settings, watermark, profiles is not None)
    kinds = []
    if params.travel or params.spending or params.velocity:
        kinds.append(_keyed("c", "card_token", "merchant_id"))
    if params.terminal:
        kinds.append(_keyed("m", _terminal(settings.terminal_key), "card_token"))
    rows = tx.select("*", F.explode(F.array(*kinds)).alias("keyed")).where(
        F.col("keyed.entity").isNotNull()
    )
    buckets = F.lit(settings.state_buckets)
    bucket = F.pmod(F.xxhash64("keyed.kind", "keyed.entity"), buckets)
    card_rows = rows.select(
        bucket.alias("bucket"),
        F.col("keyed.kind").alias("kind"),
        F.col("keyed.entity").alias("entity"),
        "event_id",
        "event_time",
        "lat",
        "lon",
        "card_present",
        "amount",
        F.col("merchant_category").alias("category"),
        F.col("keyed.other").alias("other"),
        F.col("device_id").alias("device"),
        F.lit(None).cast("string").alias("profile"),
        "event_ts",
    )
    if profiles is not None and params.spending is not None:
        card_rows = card_rows.unionByName(_profile_rows(profiles, card_rows, buckets))
    grouped = card_rows.groupBy("bucket")
    if settings.state_operator == "transformWithStateInPandas":
        return grouped.transformWithStateInPandas(
            CardBucketProcessor(params), OUTPUT_DDL, "Append", "EventTime"
        )
    return grouped.applyInPandasWithState(
        bucket_rules(params), OUTPUT_DDL, STATE_DDL, "append", "EventTimeTimeout"
    )


def _profile_rows(profiles: DataFrame, card_rows: DataFrame, buckets: Column) -> DataFrame:
    """Profiles as rows of kind p, in the bucket of their card's rows (hashed as kind c), with
    a null `event_ts`: master data, which the watermark never finds late (Spark drops input
    rows at or before it ahead of the operator)."""
    own = {
        "bucket": F.pmod(F.xxhash64(F.lit("c"), F.col("card_token")), buckets),
        "kind": F.lit("p"),
        "entity": F.col("card_token"),
        "event_id": F.col("event_id"),
        "event_time": F.col("event_time"),
        "profile": F.to_json(F.struct(*PROFILE_FIELDS[1:], "devices")),
    }
    return profiles.select(
        *(
            own.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name)
            for f in card_rows.schema.fields
        )
    )


def _keyed(kind: str, entity: str | Column, other: str) -> Column:
    entity = F.col(entity) if isinstance(entity, str) else entity
    return F.struct(F.lit(kind).alias("kind"), entity.alias("entity"), F.col(other).alias("other"))


def _terminal(key: str) -> Column:
    """What the terminal rule counts cards at: the terminal (online: the merchant) or merchant."""
    if key == "merchant":
        return F.col("merchant_id")
    return F.coalesce(F.col("terminal_id"), F.col("merchant_id"))


def python_settings(settings: CardsSettings) -> CardsSettings | None:
    """The settings of the Python operator's query: every rule in the python form; in the
    engine form only `PYTHON_RULES` (None: none of them is enabled)."""
    if settings.rules_form == "python":
        return settings
    rules = [rule for rule in settings.rules if rule in PYTHON_RULES]
    return settings.model_copy(update={"rules": rules}) if rules else None


def engine_streams(events: DataFrame, cfg: PipelineConfig) -> dict[str, DataFrame]:
    """The engine form's alert queries on parsed `events` by query name (none in the python
    form): velocity and terminal windows on the de-duplicated transactions, travel's
    self-join on the watermarked ones (a pair's id is the same whichever copy it joined)."""
    settings = cfg.cards
    if settings.rules_form != "engine":
        return {}
    rules = set(settings.rules)
    streams = {}
    if rules & {"velocity", "compromised_terminal"}:
        streams["alerts-windows"] = window_alerts(transactions(events, cfg.watermark), settings)
    if "impossible_travel" in rules:
        watermarked = events.withWatermark("event_ts", cfg.watermark)
        streams["alerts-travel"] = travel_alerts(watermarked, settings)
    return streams


def logic_streams(events: DataFrame, cfg: PipelineConfig) -> dict[str, DataFrame]:
    """The job's stateful queries on parsed `events` from any source, by query name."""
    settings = cfg.cards
    tx = transactions(events, cfg.watermark)
    streams = {
        "features": card_features(
            tx, settings.feature_windows, settings.velocity.small_amount, settings.distinct_rsd
        ),
    }
    python = python_settings(settings)
    if python is not None:
        streams["alerts"] = rule_alerts(tx, python, cfg.watermark)
    return {**streams, **engine_streams(events, cfg)}


def start(spark: SparkSession, stack: StackConfig, cfg: PipelineConfig) -> list[StreamingQuery]:
    settings = cfg.cards
    checkpoints = stack.dirs.checkpoints / NAME
    ensure_topics(stack, [settings.features_topic, cfg.output_topic, cfg.deadletter_topic])
    use_state_store(spark, settings.state_store)

    raw = read_kafka(
        spark, stack, cfg.input_topics, cfg.starting_offsets, cfg.max_offsets_per_trigger
    )
    events, rejects = parse_events(raw, TRANSACTION_SCHEMA, REQUIRED)
    tx = transactions(events, cfg.watermark)

    profiles = profile_rejects = None
    if settings.profiles_topic is not None:
        ensure_compacted(stack, settings.profiles_topic)
        profiles, profile_rejects = parse_profiles(
            read_kafka(spark, stack, [settings.profiles_topic], settings.profiles_starting_offsets)
        )

    stateful = query_trigger(cfg.trigger, stateful=True)
    windowed = query_trigger(features_trigger(cfg), stateful=True)
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
        features_records(tx, settings, final=True),
        stack,
        settings.features_topic,
        str(checkpoints / "features"),
    )
    with scheduler_pool(spark, "deadletter"):
        queries = [start_query(deadletter, f"{NAME}.deadletter", stateless, note)]
    python = python_settings(settings)
    if python is not None:
        alerts_checkpoint = Path(checkpoints / "alerts")
        sink = counting_sink(stack, cfg.output_topic, NAME, alerts_checkpoint)
        alerts = (
            rule_alerts(tx, python, cfg.watermark, profiles)
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(alerts_checkpoint))
            .outputMode("append")
        )
        with scheduler_pool(spark, "alerts"):
            queries.append(start_query(alerts, f"{NAME}.alerts", stateful))
    for name, stream in engine_streams(events, cfg).items():
        checkpoint = Path(checkpoints / name)
        engine_sink = AlertSink(
            stack, cfg.output_topic, NAME, checkpoint, stack.dirs.lake, split=with_alert_ids
        )
        writer = (
            stream.writeStream.foreachBatch(engine_sink)
            .option("checkpointLocation", str(checkpoint))
            .outputMode("append")
        )
        with scheduler_pool(spark, "alerts"):
            queries.append(start_query(writer, f"{NAME}.{name}", stateful))
    if profile_rejects is not None:
        profile_deadletter = write_kafka(
            deadletter_records(profile_rejects, NAME),
            stack,
            cfg.deadletter_topic,
            str(checkpoints / "profiles-deadletter"),
        )
        with scheduler_pool(spark, "deadletter"):
            queries.append(
                start_query(
                    profile_deadletter,
                    f"{NAME}.profiles-deadletter",
                    profiles_deadletter_trigger(cfg),
                )
            )
    with scheduler_pool(spark, "aggregates"):
        queries.insert(1, start_query(features, f"{NAME}.features", windowed))
        if settings.provisional_features:
            provisional = write_kafka(
                features_records(tx, settings, final=False),
                stack,
                settings.features_topic,
                str(checkpoints / "features-provisional"),
                "update",
            )
            queries.insert(2, start_query(provisional, PROVISIONAL_QUERY, windowed))
    queries.extend(bloom.start(spark, stack, cfg, tx))  # compromised terminals' cards
    with scheduler_pool(spark, "aggregates"):
        queries.extend(sketches.start(stack, cfg, events))  # heavy hitters, distinct cards
    return queries
