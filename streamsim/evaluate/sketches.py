"""The `sketches` block of `streamsim evaluate` (issue 35): each sketch's answers against the
exact answers from the run's events, with the configured bound beside them, in one unit.

The sketches are computed as the job computes them (`pipeline.sketches.SketchState`, the same
Spark aggregates and merges) over the run's events read back from their topic, each event id
once; the exact answers are counted in pandas from the same events.

- `count_min`: per window, kind (terminal, merchant) and key, the sketch's estimate against
  the exact count. Unit: the overcount as a share of the window's items N, the unit of ε.
  `observed_error` is the largest overcount seen; `beyond_bound_share` the share of point
  queries whose overcount exceeded ε·N, to set beside δ; `undercounts` must be 0 (a
  Count-Min sketch never undercounts). At most `MAX_QUERIES` (window, key) pairs are queried
  (every published heavy hitter, then a fixed-seed sample of the rest).
  `top_precision`: the share of published heavy hitters whose exact count reaches the
  window's exact k-th largest (ties count as found).
- `hll`: per window and terminal, the HyperLogLog estimate of distinct cards against the exact
  number. Unit: relative error, the unit of the relative standard error (RSE).
  `observed_error` is the root mean square relative error (an observed standard error);
  `beyond_two_rse_share` the share of keys off by more than two RSE (about 5 % expected).
- `bloom` is the Bloom filter's (`pipeline.jobs.cards.bloom`), added by its own module.

`within_bound`: count_min, `observed_error <= eps` and `beyond_bound_share <= delta` and no
undercount; hll, `observed_error <= rse`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from detectors.sketches import SketchParams, count_min_bound, hll_bound
from pipeline.settings import duration_ms

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipeline.sketches import Closed

#: Point queries of the Count-Min sketches at most (each is a call into the JVM).
MAX_QUERIES = 5_000
#: Sample seed of the point queries beyond the published heavy hitters.
SEED = 35


def exact_counts(rows: pd.DataFrame, window_ms: int) -> pd.DataFrame:
    """rows (event_time, kind, key, item) -> per window_start, kind, key: `count` and
    `distinct` (distinct non-null items)."""
    frame = rows.assign(window_start=rows["event_time"] // window_ms * window_ms)
    grouped = frame.groupby(["window_start", "kind", "key"])
    return pd.DataFrame(
        {"count": grouped.size(), "distinct": grouped["item"].nunique()}
    ).reset_index()


def count_min_errors(
    exact: pd.DataFrame, estimate: Callable[[int, str, str], int], n: Mapping[tuple, int]
) -> pd.DataFrame:
    """`exact` (window_start, kind, key, count) with `estimate` (window, kind, key -> the
    sketch's count) and `error`: (estimate - count) / N of its window and kind."""
    est = [
        estimate(w, k, key)
        for w, k, key in exact[["window_start", "kind", "key"]].itertuples(index=False)
    ]
    total = np.array(
        [n[(w, k)] for w, k in exact[["window_start", "kind"]].itertuples(index=False)]
    )
    out = exact.assign(estimate=est)
    return out.assign(error=(out["estimate"] - out["count"]) / total)


def count_min_figures(errors: pd.DataFrame, eps: float, delta: float) -> dict[str, Any]:
    """The observed error beside ε and δ (module docstring).

    >>> e = pd.DataFrame({"error": [0.0, 0.001, 0.004], "estimate": [5, 6, 9], "count": [5, 5, 5]})
    >>> f = count_min_figures(e, eps=0.002, delta=0.01)
    >>> f["observed_error"], f["beyond_bound_share"], f["within_bound"]
    (0.004, 0.3333, False)
    """
    err = errors["error"].to_numpy(dtype=float)
    beyond = float(np.mean(err > eps)) if err.size else 0.0
    observed = float(err.max()) if err.size else 0.0
    under = int((errors["estimate"] < errors["count"]).sum())
    return {
        "observed_error": round(observed, 6),
        "p99_error": round(float(np.quantile(err, 0.99)), 6) if err.size else 0.0,
        "mean_error": round(float(err.mean()), 6) if err.size else 0.0,
        "beyond_bound_share": round(beyond, 4),
        "undercounts": under,
        "queries": int(err.size),
        "within_bound": bool(observed <= eps and beyond <= delta and under == 0),
    }


def hll_figures(exact: pd.Series, estimate: pd.Series, rse: float) -> dict[str, Any]:
    """Relative errors of `estimate` against `exact` (aligned) beside the RSE.

    >>> hll_figures(pd.Series([100, 100]), pd.Series([101.0, 98.0]), rse=0.01625)["observed_error"]
    0.015811
    """
    rel = ((estimate - exact) / exact).to_numpy(dtype=float)
    rms = float(np.sqrt(np.mean(rel**2))) if rel.size else 0.0
    return {
        "observed_error": round(rms, 6),
        "max_error": round(float(np.abs(rel).max()), 6) if rel.size else 0.0,
        "beyond_two_rse_share": round(float(np.mean(np.abs(rel) > 2 * rse)), 4)
        if rel.size
        else 0.0,
        "keys": int(rel.size),
        "within_bound": bool(rms <= rse),
    }


def top_precision(closed: list[Closed], exact: pd.DataFrame, top: int) -> float | None:
    """Share of each window's published `top` keys whose exact count reaches that window's
    exact `top`-th largest count."""
    found = total = 0
    counts = exact.set_index(["window_start", "kind", "key"])["count"]
    for w in closed:
        mine = exact[(exact["window_start"] == w.window_start) & (exact["kind"] == w.kind)]
        if mine.empty:
            continue
        kth = mine["count"].nlargest(top).min()
        for key, _ in w.estimates[:top]:
            total += 1
            found += int(counts.get((w.window_start, w.kind, key), 0) >= kth)
    return round(found / total, 4) if total else None


def _ddl(column: pd.Series) -> str:
    if pd.api.types.is_integer_dtype(column):
        return "bigint"
    if pd.api.types.is_float_dtype(column):
        return "double"
    return "string"


def sketches_block(
    spark: SparkSession,
    events: pd.DataFrame,
    to_rows: Callable[[DataFrame], DataFrame],
    params: SketchParams,
    distinct_of: Mapping[str, str],
) -> dict[str, Any]:
    """The block over `events` (pandas, with `event_id`, `event_time` and what `to_rows`
    reads; each event id once): `to_rows` as the job's sketches query runs it."""
    from pyspark.sql import functions as F

    from pipeline.sketches import SketchState

    window_ms = duration_ms(params.window)
    ddl = ", ".join(f"`{c}` {_ddl(events[c])}" for c in events.columns)  # a column of nulls too
    frame = spark.createDataFrame(events, ddl).withColumn(
        "event_ts", F.timestamp_millis("event_time")
    )
    rows = to_rows(frame).cache()
    plain = rows.select(F.unix_millis("event_ts").alias("event_time"), "kind", "key", "item")
    exact = exact_counts(plain.toPandas(), window_ms)
    state = SketchState(spark, params, delay_ms=0)
    state.add(rows)
    closed = state.close(everything=True)
    rows.unpersist()
    by_window = {(w.window_start, w.kind): w for w in closed}
    n = {at: w.n for at, w in by_window.items()}

    cm = params.count_min
    heavy = {(w.window_start, w.kind, k) for w in closed for k, _ in w.estimates[: cm.top]}
    keyed = exact.set_index(["window_start", "kind", "key"]).index
    published = exact[keyed.isin(list(heavy))]
    rest = exact[~keyed.isin(list(heavy))]
    room = max(0, MAX_QUERIES - len(published))
    sample = rest.sample(n=min(room, len(rest)), random_state=SEED)
    queried = pd.concat([published, sample], ignore_index=True)
    errors = count_min_errors(queried, lambda w, k, key: by_window[(w, k)].estimate(key), n)
    count_min = {
        "unit": "overcount / window items (the unit of eps)",
        "bound": count_min_bound(cm),
        **count_min_figures(errors, cm.eps, cm.delta),
        "windows": len(closed),
        "keys": len(exact),
        "top": cm.top,
        "top_precision": top_precision(closed, exact, cm.top),
    }
    distinct = exact[exact["kind"].isin(list(distinct_of)) & (exact["distinct"] > 0)]
    est = pd.Series(
        [
            by_window[(w, k)].distinct.get(key, np.nan)
            for w, k, key in distinct[["window_start", "kind", "key"]].itertuples(index=False)
        ],
        index=distinct.index,
        dtype=float,
    )
    hll = {
        "unit": "relative error (the unit of rse)",
        "bound": hll_bound(params.hll),
        **hll_figures(distinct["distinct"].astype(float), est, params.hll.rse),
        "of": dict(distinct_of),
    }
    return {"window": params.window, "count_min": count_min, "hll": hll}
