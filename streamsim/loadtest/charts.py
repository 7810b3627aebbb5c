"""Charts of a run as Vega-Lite specs (plain JSON, data inline; no plotting library needed):

- `latency_over_time`: p50, p99 and max latency per time bin (by intended send time), over the
  intended and achieved request rates; the warm-up is shaded;
- `latency_percentiles`: the HdrHistogram percentile distribution (latency against
  1/(1 - percentile), log scale), the measured requests only.

Each is written as `<name>.vl.json` (the spec, for the Streamlit UI's `st.vega_lite_chart` or
any Vega-Lite renderer, offline) and `<name>.html` (opens in a browser; vega-embed is loaded
from a CDN).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from streamsim.loadtest.recorder import GOOD, Recorder

SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
MAX_BINS = 300
_HTML = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<script src="https://cdn.jsdelivr.net/npm/vega@5"></script>
<script src="https://cdn.jsdelivr.net/npm/vega-lite@5"></script>
<script src="https://cdn.jsdelivr.net/npm/vega-embed@6"></script>
</head><body><div id="chart"></div>
<script>vegaEmbed("#chart", {spec}, {{"actions": true}});</script>
</body></html>
"""


def timeline(rec: Recorder, total_s: float) -> tuple[float, list[dict[str, Any]]]:
    """Per-bin rows: t_s, intended_rate, achieved_rate, and p50_ms, p99_ms, max_ms where the
    bin has answers."""
    bin_s = max(1.0, float(np.ceil(total_s / MAX_BINS)))
    bins = max(1, int(np.ceil(total_s / bin_s)))
    times = np.asarray(rec.times)
    intended_bin = np.minimum((times // bin_s).astype(np.int64), bins - 1)
    done = rec.done_at[rec.outcome == GOOD]
    done_bin = (done // bin_s).astype(np.int64)
    done_bin = done_bin[(done_bin >= 0) & (done_bin < bins)]
    intended = np.bincount(intended_bin, minlength=bins)
    achieved = np.bincount(done_bin, minlength=bins)
    answered = ~np.isnan(rec.latency_s)
    order = np.argsort(intended_bin[answered], kind="stable")
    lat_sorted = rec.latency_s[answered][order] * 1000
    bounds = np.searchsorted(intended_bin[answered][order], np.arange(bins + 1))
    rows = []
    for b in range(bins):
        row: dict[str, Any] = {
            "t_s": b * bin_s,
            "intended_rate": float(intended[b] / bin_s),
            "achieved_rate": float(achieved[b] / bin_s),
        }
        lat = lat_sorted[bounds[b] : bounds[b + 1]]
        if lat.size:
            p50, p99 = np.percentile(lat, [50, 99])
            row.update(p50_ms=float(p50), p99_ms=float(p99), max_ms=float(lat.max()))
        rows.append(row)
    return bin_s, rows


def _long(rows: list[dict[str, Any]], keys: tuple[str, ...], value: str) -> list[dict[str, Any]]:
    return [
        {"t_s": row["t_s"], "series": key, value: round(row[key], 3)}
        for row in rows
        for key in keys
        if key in row
    ]


def latency_over_time(rec: Recorder, total_s: float, warmup_s: float) -> dict[str, Any]:
    bin_s, rows = timeline(rec, total_s)
    x = {"field": "t_s", "type": "quantitative", "title": "seconds since start (intended send)"}
    color = {"field": "series", "type": "nominal"}
    latency = {
        "layer": [
            {
                "data": {"values": [{"start": 0.0, "end": warmup_s}]},
                "mark": {"type": "rect", "color": "gray", "opacity": 0.12},
                "encoding": {
                    "x": {"field": "start", "type": "quantitative"},
                    "x2": {"field": "end"},
                },
            },
            {
                "data": {"values": _long(rows, ("p50_ms", "p99_ms", "max_ms"), "ms")},
                "mark": {"type": "line", "point": len(rows) < 60},
                "encoding": {
                    "x": x,
                    "y": {
                        "field": "ms",
                        "type": "quantitative",
                        "title": "latency ms (from intended send)",
                    },
                    "color": color,
                },
            },
        ],
        "width": 720,
        "height": 280,
        "title": f"Latency per {bin_s:g} s (warm-up shaded)",
    }
    rates = {
        "data": {"values": _long(rows, ("intended_rate", "achieved_rate"), "per_s")},
        "mark": "line",
        "encoding": {
            "x": x,
            "y": {"field": "per_s", "type": "quantitative", "title": "requests/s"},
            "color": color,
        },
        "width": 720,
        "height": 140,
        "title": "Intended vs achieved rate",
    }
    return {
        "$schema": SCHEMA,
        "vconcat": [latency, rates],
        "resolve": {"scale": {"color": "independent"}},
    }


def latency_percentiles(rec: Recorder) -> dict[str, Any]:
    values = [
        {"percentile": p, "x": 1 / (1 - p / 100), "ms": round(ms, 3)}
        for p, ms in rec.percentile_curve()
        if p < 100  # the max is in the report; 1/(1-p) has no place for it
    ]
    return {
        "$schema": SCHEMA,
        "data": {"values": values},
        "mark": {"type": "line", "point": True},
        "encoding": {
            "x": {
                "field": "x",
                "type": "quantitative",
                "scale": {"type": "log"},
                "title": "percentile (1/(1-p): 10 = p90, 100 = p99, 1000 = p99.9)",
            },
            "y": {
                "field": "ms",
                "type": "quantitative",
                "title": "latency ms (from intended send)",
            },
            "tooltip": [
                {"field": "percentile", "type": "quantitative"},
                {"field": "ms", "type": "quantitative"},
            ],
        },
        "width": 720,
        "height": 320,
        "title": "Latency by percentile (HdrHistogram)",
    }


def write_charts(rec: Recorder, total_s: float, warmup_s: float, out: Path) -> list[Path]:
    written: list[Path] = []
    charts = {
        "latency_over_time": latency_over_time(rec, total_s, warmup_s),
        "latency_percentiles": latency_percentiles(rec),
    }
    for name, spec in charts.items():
        text = json.dumps(spec)
        html, vl = out / f"{name}.html", out / f"{name}.vl.json"
        vl.write_text(text)
        html.write_text(_HTML.format(title=name.replace("_", " "), spec=text))
        written += [html, vl]
    return written
