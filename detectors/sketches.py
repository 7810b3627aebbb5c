"""Stream sketches' parameters and their error bounds, declared once (issue 35).

Count-Min (Cormode and Muthukrishnan), as Spark's `count_min_sketch(col, eps, confidence,
seed)` builds it: `depth = ceil(-ln(1 - confidence) / ln 2)` rows of `width = ceil(2 / eps)`
counters. A key's estimate never undercounts, and overcounts by more than `eps * N` (N: the
window's items) with probability at most `delta = 1 - confidence`, per query.

HyperLogLog, as Apache DataSketches builds it (`hll_sketch_agg(col, lgConfigK)`, merged with
`hll_union_agg`): relative standard error about `1.04 / sqrt(2 ** lg_config_k)` (the bound a
merged sketch keeps; an unmerged one does a little better). Two standard errors hold about
95 % of estimates.

The pipeline's forms (`pipeline.sketches`) and `streamsim evaluate`'s `sketches` block
(`streamsim.evaluate.sketches`) both take their parameters from here.
"""

from __future__ import annotations

import math

from pydantic import Field

from detectors.params import Thresholds

#: What the bound of a HyperLogLog estimate is, in relative standard errors: about 95 %.
HLL_ERRORS = 2.0


class CountMinParams(Thresholds):
    """Heavy hitters per window: a Count-Min sketch of each window's keys."""

    eps: float = Field(0.01, gt=0, lt=1, description="Count-Min relative error ε (of N).")
    confidence: float = Field(
        0.99, gt=0, lt=1, description="Count-Min confidence 1 - δ, per point query."
    )
    seed: int = Field(35, description="Count-Min hash seed (fixed: sketches merge).")
    top: int = Field(10, ge=1, description="Heavy hitters published per window and kind.")
    candidates: int = Field(
        50,
        ge=1,
        description="Keys tracked per window and kind: a micro-batch's busiest join the "
        "window's tracked keys, the lowest estimates drop out.",
    )

    @property
    def delta(self) -> float:
        """δ: the chance a point query overcounts by more than ε·N."""
        return 1.0 - self.confidence

    @property
    def width(self) -> int:
        """Counters per row, as Spark sizes them."""
        return math.ceil(2 / self.eps)

    @property
    def depth(self) -> int:
        """Rows (hash functions), as Spark sizes them."""
        return math.ceil(-math.log(1 - self.confidence) / math.log(2))


class HllParams(Thresholds):
    """Distinct counts per key and window: a HyperLogLog sketch (DataSketches)."""

    lg_config_k: int = Field(
        12, ge=4, le=21, description="HyperLogLog lgConfigK: 2^k buckets per sketch."
    )

    @property
    def rse(self) -> float:
        """Relative standard error of an estimate."""
        return 1.04 / math.sqrt(2**self.lg_config_k)


class SketchParams(Thresholds):
    """Both sketches of a job, over one tumbling event-time window."""

    window: str = Field("5 minutes", description="Tumbling event-time window of the sketches.")
    count_min: CountMinParams = Field(
        CountMinParams(), description="Heavy hitters: Count-Min sketch per window and kind."
    )
    hll: HllParams = Field(
        HllParams(), description="Distinct counts: HyperLogLog sketch per window and key."
    )


def count_min_bound(params: CountMinParams) -> dict[str, float]:
    """The Count-Min bound in the report's unit: overcount as a share of the window's items.

    >>> count_min_bound(CountMinParams(eps=0.01, confidence=0.99))
    {'eps': 0.01, 'delta': 0.01, 'width': 200, 'depth': 7}
    """
    return {
        "eps": params.eps,
        "delta": round(params.delta, 6),
        "width": params.width,
        "depth": params.depth,
    }


def hll_bound(params: HllParams) -> dict[str, float]:
    """The HyperLogLog bound in the report's unit: relative error.

    >>> hll_bound(HllParams(lg_config_k=12))
    {'lg_config_k': 12, 'rse': 0.01625, 'two_rse': 0.0325}
    """
    return {
        "lg_config_k": params.lg_config_k,
        "rse": round(params.rse, 6),
        "two_rse": round(HLL_ERRORS * params.rse, 6),
    }
