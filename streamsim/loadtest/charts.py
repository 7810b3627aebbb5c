"""Charts of a run, made offline with altair (Vega-Lite):

- `latency_over_time`: p50, p99 and max latency per time bin (by intended send time), over the
  intended and achieved request rates; the warm-up is shaded;
- `latency_percentiles`: the HdrHistogram percentile distribution (latency against
  1/(1 - percentile), log scale), the measured requests only.

Each is written as `<name>.html` (opens in a browser; vega-embed loads from a CDN) and
`<name>.vl.json` (the bare spec, data inline, for the Streamlit UI or any offline renderer).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from streamsim.loadtest.recorder import GOOD, Recorder

MAX_BINS = 300


def timeline(rec: Recorder, total_s: float) -> tuple[float, list[dict[str, Any]]]:
    """Per-bin rows: t_s, intended_rate, achieved_rate, p50_ms, p99_ms, max_ms."""
    bin_s = max(1.0, float(np.ceil(total_s / MAX_BINS)))
    bins = int(np.ceil(total_s / bin_s))
    times = np.asarray(rec.times)
    intended_bin = np.minimum((times // bin_s).astype(np.int64), bins - 1)
    good = rec.outcome == GOOD
    done_bin = (rec.done_at[good] // bin_s).astype(np.int64)
    done_bin = done_bin[(done_bin >= 0) & (done_bin < bins)]
    intended = np.bincount(intended_bin, minlength=bins)
    achieved = np.bincount(done_bin, minlength=bins)
    answered = ~np.isnan(rec.latency_s)
    rows = []
    order = np.argsort(intended_bin[answered], kind="stable")
    lat_sorted = rec.latency_s[answered][order] * 1000
    bounds = np.searchsorted(intended_bin[answered][order], np.arange(bins + 1))
    for b in range(bins):
        lat = lat_sorted[bounds[b] : bounds[b + 1]]
        row: dict[str, Any] = {
            "t_s": b * bin_s,
            "intended_rate": float(intended[b] / bin_s),
            "achieved_rate": float(achieved[b] / bin_s),
        }
        if lat.size:
            p50, p99 = np.percentile(lat, [50, 99])
            row.update(p50_ms=float(p50), p99_ms=float(p99), max_ms=float(lat.max()))
        rows.append(row)
    return bin_s, rows


def latency_over_time(rec: Recorder, total_s: float, warmup_s: float) -> Any:
    import altair as alt
    import pandas as pd

    bin_s, rows = timeline(rec, total_s)
    frame = pd.DataFrame(rows)
    for column in ("p50_ms", "p99_ms", "max_ms"):
        if column not in frame:
            frame[column] = np.nan
    latency = frame.melt("t_s", ["p50_ms", "p99_ms", "max_ms"], "series", "ms").dropna()
    rates = frame.melt("t_s", ["intended_rate", "achieved_rate"], "series", "per_s")
    x = alt.X("t_s:Q", title="seconds since start (by intended send time)")
    warm = alt.Chart(pd.DataFrame({"start": [0.0], "end": [warmup_s]})).mark_rect(
        opacity=0.12, color="gray"
    )
    warm = warm.encode(x="start:Q", x2="end:Q")
    top = alt.layer(
        warm,
        alt.Chart(latency)
        .mark_line(point=len(frame) < 60)
        .encode(x=x, y=alt.Y("ms:Q", title="latency ms (from intended send)"), color="series:N"),
    ).properties(width=720, height=280, title=f"Latency per {bin_s:g} s (warm-up shaded)")
    bottom = (
        alt.Chart(rates)
        .mark_line()
        .encode(x=x, y=alt.Y("per_s:Q", title="requests/s"), color="series:N")
        .properties(width=720, height=140, title="Intended vs achieved rate")
    )
    return alt.vconcat(top, bottom).resolve_scale(color="independent")


def latency_percentiles(rec: Recorder) -> Any:
    import altair as alt
    import pandas as pd

    points = rec.percentile_curve()
    frame = pd.DataFrame(
        [
            {"percentile": p, "x": 1 / (1 - p / 100), "ms": ms}
            for p, ms in points
            if p < 100  # the max is in the report; 1/(1-p) has no place for it
        ]
        or [{"percentile": 0.0, "x": 1.0, "ms": 0.0}]
    )
    return (
        alt.Chart(frame)
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "x:Q",
                scale=alt.Scale(type="log"),
                title="percentile (1/(1-p): 10 = p90, 100 = p99, 1000 = p99.9)",
            ),
            y=alt.Y("ms:Q", title="latency ms (from intended send)"),
            tooltip=["percentile:Q", "ms:Q"],
        )
        .properties(width=720, height=320, title="Latency by percentile (HdrHistogram)")
    )


def write_charts(rec: Recorder, total_s: float, warmup_s: float, out: Path) -> list[Path]:
    written: list[Path] = []
    charts = {
        "latency_over_time": latency_over_time(rec, total_s, warmup_s),
        "latency_percentiles": latency_percentiles(rec),
    }
    for name, chart in charts.items():
        html, spec = out / f"{name}.html", out / f"{name}.vl.json"
        chart.save(str(html))
        spec.write_text(chart.to_json())
        written += [html, spec]
    return written
