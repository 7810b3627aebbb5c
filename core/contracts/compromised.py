"""The record of a compromised terminal's cards (`cards.compromised-cards`): a Bloom filter of
the cards seen at the terminal in a window the compromised-terminal rule fired on, built by the
cards job with Spark's `bloom_filter_agg`, applied by the fraud endpoint
(`detectors.cards.bloom`). Cards are in it as their tokens' keys, never as card numbers.
"""

from __future__ import annotations

from core.contracts import topics
from core.contracts.events import Field, Record

SCHEMA = "cards.compromised-cards/1"

COMPROMISED_CARDS = Record(
    "cards.compromised-cards",
    (
        Field("schema", "string", choices=(SCHEMA,), doc=f"`{SCHEMA}`"),
        Field("terminal_id", "string", doc="The terminal (online: the merchant), `terminal_key`."),
        Field("window_start", "int", doc="The window the rule fired on, epoch ms."),
        Field("window_end", "int", doc="Its end (exclusive), epoch ms."),
        Field("distinct_cards", "int", doc="Distinct cards in the window (the job's estimate)."),
        Field("tx_count", "int", doc="Uses in the window."),
        Field("first_crossing", "bool", doc="The window the rule alerted on (a burst's first)."),
        Field(
            "filter",
            "string",
            doc="Spark's serialized BloomFilter (`BloomFilter.writeTo`), base64.",
        ),
        Field("item", "string", choices=("token_key",), doc="What each card is put in as."),
        Field("fpp", "float", decimals=6, doc="The false-positive rate it is sized for ..."),
        Field("expected_items", "int", doc="... at this many cards."),
        Field("num_bits", "int", doc="Bits asked for (Spark rounds up to whole longs)."),
        Field("job", "string", doc="The Spark job that built it."),
        Field("published_at", "int", doc="Processing time, epoch ms."),
    ),
    "A Bloom filter of the cards seen at a terminal while the compromised-terminal rule fired.",
    topics.CARDS_COMPROMISED_CARDS,
)
