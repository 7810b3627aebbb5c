"""The panel's live parts: the EventSource component's page (its settings, no way out of its
script), and the Live page's stale pipeline figures (said stale, with their age)."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from streamlit.testing.v1 import AppTest

from tests.unit.test_ui_pages import canned, page_script
from ui.client import ApiClient
from ui.live_feed import PUBLIC_URL_ENV, alert_ids, browser_api_url, feed_html
from ui.sections.live import is_stale, report_state, stale_note
from ui.status import STALE_S


def config_of(html: str) -> dict[str, object]:
    found = re.search(r"const C = (.*);\n", html)
    assert found, html[:200]
    loaded: dict[str, object] = json.loads(found[1])
    return loaded


def test_the_component_starts_after_the_snapshot_and_skips_what_it_shows() -> None:
    html = feed_html("http://api:8000", limit=25, after="0:12", skip=["a1"], backlog=25)
    config = config_of(html)
    assert config["after"] == "0:12" and config["backlog"] == 0  # `after` wins
    assert config["skip"] == ["a1"] and config["limit"] == 25
    assert "new EventSource" in html and "/v1/stream/alerts" in html
    assert "innerHTML" not in html  # records render as text only
    fresh = config_of(feed_html("http://api:8000", limit=5, backlog=5, progress=True))
    assert fresh["after"] is None and fresh["backlog"] == 5 and fresh["progress"] is True


def test_no_value_can_end_the_components_script() -> None:
    html = feed_html("http://api", limit=5, skip=["</script><script>alert(1)</script>"])
    assert html.count("</script>") == 1
    assert config_of(html)["skip"] == ["</script><script>alert(1)</script>"]


def test_the_browser_reaches_the_api_where_the_panel_does_unless_told(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(PUBLIC_URL_ENV, raising=False)
    assert browser_api_url("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    monkeypatch.setenv(PUBLIC_URL_ENV, "https://api.example/")
    assert browser_api_url("http://127.0.0.1:8000") == "https://api.example"
    assert alert_ids([{"alert_id": "a"}, {"rule": "x"}]) == ["a"]


def test_a_query_is_stale_past_the_threshold_and_says_its_age() -> None:
    assert report_state({"report_age_s": 2.0}) == "live, 2.0 s ago"
    assert report_state({"report_age_s": 318.0}) == "STALE, 5.3 min ago"
    assert report_state({}) == "—"
    assert not is_stale({"report_age_s": STALE_S}) and is_stale({"report_age_s": STALE_S + 1})
    assert not is_stale({})  # no report time: not said to be stale
    note = stale_note([{"report_age_s": 318.0}, {"report_age_s": 900.0}], 0)
    assert "stopped updating" in note and "5.3 min ago" in note and "2 of 2" in note


def test_live_page_shows_a_stopped_jobs_figures_as_stale() -> None:
    queries = [
        {"query": f"q{i}", "job": "cards", "mode": "append", "processed_rows_per_s": 6725.0,
         "report_age_s": 318.0, "late_events_seen": 0}
        for i in range(8)
    ]  # fmt: skip
    pipeline = {"queries": queries, "jobs": [{"job": "cards", "late_events_seen": 0}]}
    fallback = canned([])

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/pipeline":
            return httpx.Response(200, json=pipeline)
        return fallback(request)

    client = ApiClient("http://api", token="t", transport=httpx.MockTransport(handle))
    live = AppTest.from_function(page_script, args=("live", client), default_timeout=30)
    live.run()
    assert not live.exception, live.exception
    (warning,) = [w.value for w in live.warning]
    assert "stopped updating" in warning and "8 of 8" in warning and "5.3 min ago" in warning
    metrics = {m.label: m.value for m in live.metric}
    assert metrics["Queries reporting"] == "0" and metrics["Rows processed/s"] == "stopped"
    (table,) = [t.value for t in live.table if "last report" in t.value.columns]
    assert set(table["last report"]) == {"STALE, 5.3 min ago"}
