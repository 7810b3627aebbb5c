"""The sketch records (issue 35), each on its own topic, declared once: the pipeline writes
them (`pipeline.sketches.heavy_records`, `distinct_records`), the panel reads them.

- `HEAVY_HITTER`: one of a window's busiest keys of one kind (terminal, merchant, device) by
  its Count-Min estimate, with the bound: the estimate overcounts by more than
  `overcount_bound` (= eps * window_items) with probability at most `delta`; it never
  undercounts.
- `DISTINCT_COUNT`: a key's distinct items in a window (cards at a terminal, devices at a
  site) by a HyperLogLog estimate, with its relative standard error `rse`.
"""

from __future__ import annotations

from core.contracts import topics
from core.contracts.events import Field, Record

_WINDOW = (
    Field("job", "string", doc="The Spark job that published it."),
    Field("kind", "string", doc="What the key is: terminal, merchant, device or site."),
    Field("key", "string", doc="The terminal, merchant, device or site id."),
    Field("window_start", "int", doc="Tumbling event-time window start, epoch ms."),
    Field("window_end", "int", doc="Window end, epoch ms (exclusive)."),
)

HEAVY_HITTER = Record(
    "aggregates.heavy-hitter",
    (
        *_WINDOW,
        Field("rank", "int", doc="1 = the window's busiest key of its kind by estimate."),
        Field("estimate", "int", doc="Count-Min estimate of the key's events in the window."),
        Field("window_items", "int", doc="Events of this kind in the window (N)."),
        Field("overcount_bound", "float", doc="eps * N: the estimate's overcount bound."),
        Field("eps", "float", doc="Count-Min relative error ε."),
        Field("delta", "float", doc="Chance δ of an overcount beyond the bound, per key."),
    ),
    "One of a window's busiest keys, a Count-Min estimate with its bound.",
    topics.HEAVY_HITTERS,
)
DISTINCT_COUNT = Record(
    "aggregates.distinct-count",
    (
        *_WINDOW,
        Field("of", "string", doc="What is counted distinct: card (per terminal), device."),
        Field("estimate", "float", doc="HyperLogLog estimate of the distinct items."),
        Field("rse", "float", doc="The estimate's relative standard error."),
        Field("lg_config_k", "int", doc="HyperLogLog lgConfigK (2^k buckets)."),
    ),
    "A key's distinct items in a window, a HyperLogLog estimate with its error.",
    topics.DISTINCT_COUNTS,
)
