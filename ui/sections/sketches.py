"""The Live page's sketches: each job's newest window of heavy hitters (Count-Min) and
distinct counts (HyperLogLog), from `GET /v1/sketches`. Every figure is an estimate and is
shown as one, with its bound: a Count-Min count overcounts by at most ε·N with probability
1 - δ and never undercounts; a HyperLogLog count is off by about its relative standard error
(two of them hold about 95 %)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from ui.client import ApiClient
from ui.view import api_errors, fmt_ms


def heavy_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Heavy hitters as the table shows them: the estimate with its ± bound.

    >>> heavy_frame([{"job": "cards", "kind": "terminal", "key": "t1", "rank": 1,
    ...   "estimate": 50, "window_items": 1000, "overcount_bound": 10.0, "eps": 0.01,
    ...   "delta": 0.01, "window_start": 0}])["estimate"].tolist()
    ['≤ 50 (≥ 40)']
    """
    return pd.DataFrame(
        [
            {
                "job": r.get("job"),
                "kind": r.get("kind"),
                "rank": r.get("rank"),
                "key": r.get("key"),
                "estimate": f"≤ {r.get('estimate')} (≥ {_floor(r)})",
                "window events": r.get("window_items"),
                "ε / δ": f"{r.get('eps')} / {r.get('delta')}",
            }
            for r in rows
        ]
    )


def _floor(r: dict[str, Any]) -> int:
    """The smallest true count the estimate allows (with probability 1 - δ)."""
    return max(0, int((r.get("estimate") or 0) - (r.get("overcount_bound") or 0.0)))


def distinct_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Distinct counts with their relative standard error.

    >>> distinct_frame([{"job": "cards", "kind": "terminal", "key": "t1", "of": "card",
    ...   "estimate": 200.0, "rse": 0.01625, "window_start": 0}])["estimate"].tolist()
    ['≈ 200 ± 3 (1 rse)']
    """
    return pd.DataFrame(
        [
            {
                "job": r.get("job"),
                "key": f"{r.get('kind')} {r.get('key')}",
                "distinct": f"{r.get('of')}s",
                "estimate": f"≈ {r.get('estimate', 0):.0f} ± "
                f"{(r.get('estimate') or 0) * (r.get('rse') or 0):.0f} (1 rse)",
                "rse": r.get("rse"),
            }
            for r in rows
        ]
    )


def render(client: ApiClient) -> None:
    st.subheader("Sketches (estimates)")
    with api_errors("Reading the sketches"):
        view = client.sketches()
        heavy, distinct = view.get("heavy_hitters") or [], view.get("distinct_counts") or []
        if not heavy and not distinct:
            st.info(
                "No sketches yet: a job with `sketches.enabled` publishes each window's once "
                "the watermark passes its end (`aggregates.heavy-hitters`)."
            )
            return
        starts = [r.get("window_start") for r in heavy + distinct if r.get("window_start")]
        st.caption(
            f"Newest window from {fmt_ms(min(starts))}. Heavy hitters are Count-Min estimates: "
            "never below the true count, above it by at most ε·N (N: the window's events) "
            "with probability 1 - δ. Distinct counts are HyperLogLog estimates, off by about "
            "one relative standard error (rse); `streamsim evaluate` measures both against "
            "the run's exact counts."
        )
        if heavy:
            st.markdown("**Busiest per window** (terminals, merchants, devices)")
            st.dataframe(heavy_frame(heavy), hide_index=True, width="stretch")
        if distinct:
            st.markdown("**Distinct per key** (cards per terminal, devices per site)")
            st.dataframe(distinct_frame(distinct), hide_index=True, width="stretch")
