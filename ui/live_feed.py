"""The panel's live views in the browser: a small HTML component (`streamlit.components.v1.html`)
whose `EventSource` follows the API's server-sent events (`/v1/stream/alerts`, and on the Live
page `/v1/stream/metrics`), so a new alert shows as it lands in Kafka, with no page rerun.

The browser talks to the API itself, at the URL the panel uses (`STREAMSIM_API_URL`) unless
`STREAMSIM_PUBLIC_API_URL` says where browsers reach it. The streams are open, as the read
routes they mirror, and answer CORS for a page on the API's own host: no token is involved.

Alerts render with `textContent` only (never HTML from a record). The component says whether
it is connected, when the last alert came, and when the server said it missed rows (`gap`)
or dropped a slow client; pipeline progress it shows per query with the report's age, marked
stale past `stale_s`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

import streamlit.components.v1 as components

PUBLIC_URL_ENV = "STREAMSIM_PUBLIC_API_URL"


def browser_api_url(panel_url: str) -> str:
    """Where the browser reaches the API: `STREAMSIM_PUBLIC_API_URL`, else the panel's own."""
    return (os.environ.get(PUBLIC_URL_ENV) or panel_url).rstrip("/")


def feed_html(
    api_url: str,
    *,
    limit: int,
    query: dict[str, str] | None = None,
    after: str | None = None,
    skip: Iterable[str] = (),
    backlog: int = 0,
    progress: bool = False,
    stale_s: float = 60.0,
) -> str:
    """The component's page. `after`: start after this stream position (a `live` id read
    before the page's snapshot), `skip`: alert ids the page already shows; without `after`,
    `backlog` newest held alerts first. `progress`: also follow pipeline progress."""
    config = {
        "api": api_url,
        "limit": limit,
        "query": {k: v for k, v in (query or {}).items() if v},
        "after": after,
        "skip": list(skip),
        "backlog": 0 if after else backlog,
        "progress": progress,
        "staleS": stale_s,
    }
    # `</` cannot end the script early inside a JSON string.
    data = json.dumps(config).replace("</", "<\\/")
    return PAGE.replace("__CONFIG__", data)


def show(html: str, height: int) -> None:
    components.html(html, height=height, scrolling=True)


def alert_ids(rows: Iterable[dict[str, Any]]) -> list[str]:
    return [str(r["alert_id"]) for r in rows if r.get("alert_id")]


PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><style>
body { font-family: "Source Sans Pro", "Source Sans 3", sans-serif; margin: 0; color: #31333f;
       font-size: 14px; }
#status { color: #555; margin: 2px 0 6px; }
#status .dot { font-size: 12px; }
.note { background: #fff3cd; border-radius: 6px; padding: 6px 8px; margin: 4px 0; }
.alert { border: 1px solid #e6e6ea; border-radius: 8px; padding: 8px 10px; margin: 6px 0; }
.alert.new { border-color: #ff4b4b; }
.alert .head { font-weight: 600; }
.alert .meta, .alert .events { color: #666; font-size: 12px; }
.alert pre { background: #f6f6f9; border-radius: 6px; padding: 6px 8px; margin: 4px 0;
             white-space: pre-wrap; font-size: 12px; }
#progress div { margin: 2px 0; }
.stale { color: #999; }
</style></head><body>
<div id="status"><span class="dot">○</span> <span id="state">connecting…</span></div>
<div id="notes"></div>
<div id="progress"></div>
<div id="alerts"></div>
<script>
const C = __CONFIG__;
const seen = new Set(C.skip);
const list = document.getElementById("alerts");
let lastAlertAt = null, live = false, count = 0;
const queries = new Map();

function utc(ms) {
  if (typeof ms !== "number") return "—";
  return new Date(ms).toISOString().slice(0, 19).replace("T", " ");
}
function ago(ms) {
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 120) return s.toFixed(0) + " s";
  if (s < 7200) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
function lines(value, depth) {
  const pad = "  ".repeat(depth);
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return [pad + (Array.isArray(value) ? "[" + value.slice(0, 6).join(", ") + "]" : value)];
  }
  const out = [];
  for (const [k, v] of Object.entries(value)) {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      out.push(pad + k + ":");
      out.push(...lines(v, depth + 1));
    } else if (Array.isArray(v)) {
      out.push(pad + k + ": [" + v.slice(0, 6).join(", ") + (v.length > 6 ? " …" : "") + "]");
    } else {
      out.push(pad + k + ": " + (typeof v === "number" && !Number.isInteger(v)
        ? Number(v.toFixed(3)) : v));
    }
  }
  return out;
}
function note(text) {
  const n = el("div", "note", text);
  const notes = document.getElementById("notes");
  notes.prepend(n);
  while (notes.children.length > 3) notes.lastChild.remove();
}
function stream(path, params) {
  const q = new URLSearchParams(Object.assign({}, C.query, params));
  return new EventSource(C.api + path + "?" + q.toString());
}
function addAlert(a) {
  if (!a || !a.alert_id || seen.has(a.alert_id)) return;
  seen.add(a.alert_id);
  count += 1;
  lastAlertAt = Date.now();
  const card = el("div", "alert new");
  card.dataset.alertId = a.alert_id;
  const entity = String(a.entity_id || "?");
  card.append(el("div", "head", a.rule + (a.label ? " · label " + a.label : "") +
    " · entity " + (entity.length > 24 ? entity.slice(0, 20) + "…" : entity)));
  card.append(el("div", "meta", "event time " + utc(a.event_time) + " · detected " +
    utc(a.detected_at) + " UTC · " + (a.job || "?")));
  card.append(el("pre", null, lines(a.evidence || {}, 0).join("\\n")));
  const ids = a.event_ids || [];
  if (ids.length) {
    card.append(el("div", "events", "events: " + ids.slice(0, 5).join(", ") +
      (ids.length > 5 ? " …" : "")));
  }
  list.prepend(card);
  setTimeout(() => card.classList.remove("new"), 5000);
  while (list.children.length > C.limit) list.lastChild.remove();
}
function render() {
  const dot = document.querySelector("#status .dot");
  dot.textContent = live ? "●" : "○";
  dot.style.color = live ? "#21c354" : "#ff8c00";
  document.getElementById("state").textContent = (live ? "live" : "reconnecting…") +
    " · " + count + " alert" + (count === 1 ? "" : "s") + " received" +
    (lastAlertAt ? " · the last " + ago(lastAlertAt) + " ago" : "");
  if (C.progress) {
    const box = document.getElementById("progress");
    box.replaceChildren();
    for (const [name, q] of [...queries.entries()].sort()) {
      const old = typeof q.at === "number" && Date.now() - q.at > C.staleS * 1000;
      const rate = typeof q.processed_rows_per_s === "number"
        ? q.processed_rows_per_s.toFixed(1) + " rows/s" : "—";
      box.append(el("div", old ? "stale" : null, (old ? "stale · " : "● ") + name + " (" +
        (q.job || "?") + ") " + rate + " · reported " +
        (typeof q.at === "number" ? ago(q.at) + " ago" : "—")));
    }
  }
}
const alerts = stream("/v1/stream/alerts",
  C.after ? {after: C.after} : {backlog: String(C.backlog)});
alerts.addEventListener("alert", e => { addAlert(JSON.parse(e.data)); render(); });
alerts.addEventListener("live", () => { live = true; render(); });
alerts.addEventListener("gap", e => {
  const d = JSON.parse(e.data);
  note("Missed alerts the server no longer holds: " + (d.reason || JSON.stringify(d.missed)));
});
alerts.addEventListener("dropped", () => note("The server dropped this view as too slow; " +
  "reconnecting from the last alert shown."));
alerts.onerror = () => { live = false; render(); };
if (C.progress) {
  const progress = stream("/v1/stream/metrics", {backlog: "200"});
  progress.addEventListener("progress", e => {
    const q = JSON.parse(e.data);
    const known = queries.get(q.query);
    if (!known || (q.at || 0) >= (known.at || 0)) queries.set(q.query, q);
    render();
  });
}
setInterval(render, 1000);
render();
</script></body></html>
"""
