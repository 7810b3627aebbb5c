"""The card rules in Spark's engine (`cards.rules_form: engine`): Column expressions and
built-in operators, no Python worker, from the same params objects as the Python form.

- velocity (per card) and compromised terminal (per terminal, `terminal_key`): ONE
  aggregation over sliding event-time windows. Each transaction is a card row and a terminal
  row (`kind` c / m, as the Python operator has them), exploded into the windows of its
  kind's rule (`VelocityParams.window_s` or `TerminalParams.window_s`, sliding by
  `rule_slide`), grouped by (kind, entity, window): count, small count, sum, approx distinct
  merchants (card rows) or cards (terminal rows), the same three before the window's last
  slide, the latest event time and the sorted event ids. `pipeline.rules.velocity` and
  `pipeline.rules.terminal` judge each closed window (first crossing of a burst only);
- impossible travel: a time-bounded self-join of each card's located uses
  (`pipeline.rules.travel`), another query, as a join's watermark is its own;
- spending (account takeover): no engine form here; it stays in the Python operator of
  `pipeline.jobs.cards.state`, fed only the card rows (and profiles), see the job docstring.

Alert rows carry the key text in `alert_id`; `pipeline.rules.alert_rows.with_alert_ids`
hashes it on the driver, so each id is the Python form's for the same window or pair. Where
a form differs by design, its rule module says how.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.event_windows import window_bounds
from pipeline.jobs.cards.config import CardsSettings
from pipeline.rules.alert_rows import FIELDS as ALERT_FIELDS
from pipeline.rules.terminal import terminal_alert, terminal_first_crossing
from pipeline.rules.travel import travel_pairs
from pipeline.rules.velocity import velocity_alert, velocity_first_crossing

CARD, TERMINAL = "c", "m"


def _terminal(key: str) -> Column:
    """What the terminal rule counts cards at: the terminal (online: the merchant) or merchant."""
    if key == "merchant":
        return F.col("merchant_id")
    return F.coalesce(F.col("terminal_id"), F.col("merchant_id"))


def sliding(length_ms: int, slide_ms: int, time_column: str = "event_ts") -> Column:
    """The windows of `length_ms` sliding by `slide_ms` that hold the row's time (aligned to
    the epoch, as `window()`), each with `prior`: the row lies before its last slide."""
    micros = F.unix_micros(time_column)
    length, slide = length_ms * 1000, slide_ms * 1000
    last_start = micros - F.pmod(micros, F.lit(slide))
    items = []
    for k in range(-(-length // slide)):
        start = last_start - k * slide
        items.append(
            F.struct(
                F.timestamp_micros(start).alias("start"),
                F.timestamp_micros(start + length).alias("end"),
                (micros < start + (length - slide)).alias("prior"),
            )
        )
    return F.filter(F.array(*items), lambda w: w["end"] > F.col(time_column))


def window_rows(tx: DataFrame, settings: CardsSettings) -> DataFrame:
    """A row per (kind, entity, window) holding each transaction, `window` carrying the
    transactions' watermark (as `window()`'s does)."""
    rules = set(settings.rules)
    slide = settings.rule_slide_ms
    kinds, windows = [], []
    if "velocity" in rules:
        length = settings.velocity.window_ms
        kinds.append(_keyed(CARD, F.col("card_token"), F.col("merchant_id")))
        windows.append((CARD, sliding(length, slide or length)))
    if "compromised_terminal" in rules:
        length = max(1, round(settings.terminal.window_s * 1000))
        kinds.append(_keyed(TERMINAL, _terminal(settings.terminal_key), F.col("card_token")))
        windows.append((TERMINAL, sliding(length, slide or length)))
    if not kinds:
        raise ValueError("window_rows needs velocity or compromised_terminal in the rules")
    rows = tx.select("*", F.explode(F.array(*kinds)).alias("keyed")).where(
        F.col("keyed.entity").isNotNull()
    )
    by_kind = windows[0][1]
    for kind, column in windows[1:]:
        by_kind = F.when(F.col("keyed.kind") == kind, column).otherwise(by_kind)
    watermark = tx.schema["event_ts"].metadata
    return rows.select(
        F.col("keyed.kind").alias("kind"),
        F.col("keyed.entity").alias("entity"),
        F.col("keyed.other").alias("other"),
        "event_id",
        "event_time",
        "amount",
        F.explode(by_kind).alias("w"),
    ).select(
        "kind",
        "entity",
        "other",
        "event_id",
        "event_time",
        "amount",
        F.col("w.prior").alias("prior"),
        F.struct("w.start", "w.end").alias("window", metadata=watermark),
    )


def _keyed(kind: str, entity: Column, other: Column) -> Column:
    return F.struct(F.lit(kind).alias("kind"), entity.alias("entity"), other.alias("other"))


def window_alerts(tx: DataFrame, settings: CardsSettings) -> DataFrame:
    """Alert rows (`ALERT_FIELDS`, key text in `alert_id`) of velocity and compromised
    terminal over `tx` (de-duplicated transactions, `event_ts` watermarked if streaming)."""
    rsd = settings.distinct_rsd
    small = F.col("amount") < F.lit(settings.velocity.small_amount)
    prior = F.col("prior")
    other = F.coalesce(F.col("other"), F.lit(""))
    windows = (
        window_rows(tx, settings)
        .groupBy("kind", "entity", "window")
        .agg(
            F.count(F.lit(1)).alias("tx_count"),
            F.count_if(small).alias("small_count"),
            F.sum("amount").alias("amount_sum"),
            F.approx_count_distinct(other, rsd).alias("distinct"),
            F.count_if(prior).alias("prior_tx_count"),
            F.count_if(prior & small).alias("prior_small_count"),
            F.approx_count_distinct(F.when(prior, other), rsd).alias("prior_distinct"),
            F.max("event_time").alias("last_event_time"),
            F.array_sort(F.collect_list("event_id")).alias("event_ids"),
        )
        .select(
            "*",
            *window_bounds(),
            F.col("distinct").alias("distinct_merchants"),
            F.col("distinct").alias("distinct_cards"),
            F.col("prior_distinct").alias("prior_distinct_merchants"),
            F.col("prior_distinct").alias("prior_distinct_cards"),
        )
    )
    args = (
        F.col("entity"),
        F.col("window_start"),
        F.col("window_end"),
        F.col("last_event_time"),
        F.col("event_ids"),
    )
    kind = F.col("kind")
    fired = F.when(
        (kind == CARD) & velocity_first_crossing(settings.velocity),
        velocity_alert(*args, settings.velocity),
    ).when(
        (kind == TERMINAL) & terminal_first_crossing(settings.terminal),
        terminal_alert(*args, settings.terminal),
    )
    alerts = windows.select(fired.alias("a")).where(F.col("a").isNotNull())
    return alerts.select(*(F.col("a")[name].alias(name) for name in ALERT_FIELDS))


def travel_alerts(tx: DataFrame, settings: CardsSettings) -> DataFrame:
    """Alert rows of impossible travel over `tx` (watermarked if streaming; duplicates need
    not be dropped: a pair's alert id is the same whichever copy it joined)."""
    uses = tx.select(
        F.col("card_token").alias("entity"),
        "event_id",
        "event_time",
        "lat",
        "lon",
        "card_present",
        "event_ts",
    )
    return travel_pairs(uses, settings.travel)


def batch_alerts(events: DataFrame, settings: CardsSettings) -> DataFrame:
    """Both engine queries' alert rows over a batch DataFrame of transactions (each event id
    once, as the stream's de-duplication leaves them; one row per alert key)."""
    rules = set(settings.rules)
    stamped = events.withColumn("event_ts", F.timestamp_millis("event_time"))
    once = stamped.dropDuplicates(["event_id"])
    parts = []
    if rules & {"velocity", "compromised_terminal"}:
        parts.append(window_alerts(once, settings))
    if "impossible_travel" in rules:
        parts.append(travel_alerts(once, settings))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out.dropDuplicates(["alert_id"])
