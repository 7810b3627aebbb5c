"""The card job's sketches (`cards.sketches`, `pipeline.sketches`): per tumbling window the
busiest terminals and merchants (Count-Min) and the distinct cards per terminal
(HyperLogLog). A terminal is what the compromised-terminal rule counts cards at
(`cards.terminal_key`: the terminal, the merchant for online uses)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from core.config import StackConfig
from pipeline.config import PipelineConfig
from pipeline.settings import duration_ms
from pipeline.sketches import sketch_rows, start_sketches

#: kind -> what its distinct count counts.
DISTINCT_OF = {"terminal": "card"}


def terminal(key: str) -> Column:
    """What the terminal rule counts cards at (`cards.terminal_key`)."""
    if key == "merchant":
        return F.col("merchant_id")
    return F.coalesce(F.col("terminal_id"), F.col("merchant_id"))


def card_sketch_rows(events: DataFrame, terminal_key: str = "terminal") -> DataFrame:
    """Parsed transactions (`event_ts`) -> sketch rows: terminal (item: the card) and
    merchant, each event id once."""
    return sketch_rows(
        events.dropDuplicates(["event_id"]),
        {
            "terminal": (terminal(terminal_key), F.col("card_token")),
            "merchant": (F.col("merchant_id"), None),
        },
    )


def start(stack: StackConfig, cfg: PipelineConfig, events: DataFrame) -> list[StreamingQuery]:
    """`cards.sketches` on the parsed transactions, when `cards.sketches.enabled`."""
    settings = cfg.cards.sketches
    if not settings.enabled:
        return []
    if cfg.trigger.mode == "available_now":  # a drain: every query ends
        settings = settings.model_copy(update={"trigger": cfg.trigger})
    key = cfg.cards.terminal_key
    return [
        start_sketches(
            stack,
            events,
            "cards",
            settings,
            lambda batch: card_sketch_rows(batch, key),
            DISTINCT_OF,
            duration_ms(cfg.watermark),
            str(stack.dirs.checkpoints / "cards" / "sketches"),
        )
    ]
