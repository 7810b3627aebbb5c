"""The Evaluation page's "Evaluate a run" and run-to-run comparison: its pure frames, and the
page under Streamlit's AppTest against a canned API."""

from __future__ import annotations

from typing import Any

import httpx
from streamlit.testing.v1 import AppTest

from ui.client import ApiClient
from ui.sections import evaluation

RUN = "cards-20261124-180000-a1b2c3"
OLDER = "cards-20261124-170000-d4e5f6"


def scored(run_id: str, recall: float, overrides: dict[str, Any], speed: Any = None) -> dict:
    return {
        "run_id": run_id,
        "scenario": "cards",
        "status": "done",
        "requested_at": 1,
        "started_at": 2,
        "ended_at": 1_795_000_000_000,
        "knobs": {
            "speed": speed,
            "duration_s": 1800.0,
            "seed": None,
            "overrides": overrides,
            "live": None,
        },
        "report": {
            "scenario": "cards",
            "run": {"id_prefix": "cv-1-", "events": 900},
            "paths": {
                "pipeline": {
                    "card_testing": {
                        "precision": 1.0,
                        "recall": recall,
                        "f1": 0.9,
                        "support": 6,
                        "latency_ms": {"p50": 1500.0, "p99": 4000.0},
                    }
                }
            },
            "late_dropped": 0,
            "hard_negative_alerts": 0,
        },
        "error": None,
    }


def test_knobs_flatten_to_dotted_keys_without_the_class_copies() -> None:
    knobs = {
        "speed": 60.0,
        "duration_s": None,
        "seed": 3,
        "overrides": {
            "entities": 500,
            "delivery": {"drops": {"probability": 0.01}},
            "classes": {
                "pos": {"delivery": {"drops": {"probability": 0.01}}},
                "gw": {"delivery": {"drops": {"probability": 0.02}}},  # its own: kept
            },
        },
        "live": {"max_rate": 50.0},
    }
    assert evaluation.flat_knobs(knobs) == {
        "speed": 60.0,
        "duration_s": None,
        "seed": 3,
        "entities": 500,
        "delivery.drops.probability": 0.01,
        "classes.gw.delivery.drops.probability": 0.02,
        "live.max_rate": 50.0,
    }


def test_the_comparison_has_a_row_per_scored_run_with_its_knobs_and_scores() -> None:
    failed = {**scored("x", 0.0, {}), "status": "failed", "report": None}
    other = {**scored("sensors-1", 0.5, {}), "scenario": "sensors"}
    frames = evaluation.comparison_frames(
        [
            scored(RUN, 0.75, {"entities": 500, "domain": {"delivery": "http"}}, speed=60.0),
            scored(OLDER, 0.5, {"entities": 1000}),
            failed,
            other,
        ]
    )
    assert set(frames) == {"cards", "sensors"}
    cards = frames["cards"]
    assert list(cards.index) == [RUN, OLDER]  # as listed: newest first; the failed one left out
    figures = [f"pipeline · card_testing · {f}" for f in ("P", "R", "F1")]
    assert list(cards.columns) == [
        "scored", "speed", "duration_s", "entities", "domain.delivery", *figures
    ]  # fmt: skip
    assert cards.loc[RUN, "pipeline · card_testing · R"] == "0.750"
    assert cards.loc[OLDER, "pipeline · card_testing · R"] == "0.500"
    assert cards.loc[RUN, "speed"] == "60" and cards.loc[OLDER, "speed"] == "file"
    assert cards.loc[RUN, "domain.delivery"] == "http"
    assert cards.loc[OLDER, "domain.delivery"] == "file"
    assert evaluation.comparison_frames([failed]) == {}


# -- the page --------------------------------------------------------------------------------


def canned(state: dict[str, Any], seen: list[httpx.Request]) -> httpx.MockTransport:
    """Runs RUN (finished) and OLDER (scored before); POSTing RUN's evaluation scores it."""

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        path, method = request.url.path, request.method
        run = {"run_id": RUN, "scenario": "cards", "status": "finished"}
        if (method, path) == ("GET", "/v1/runs"):
            older = {**run, "run_id": OLDER}
            return httpx.Response(200, json={"runs": [run, older]})
        if (method, path) == ("POST", f"/v1/control/runs/{RUN}/evaluation"):
            state[RUN] = scored(RUN, 0.75, {"entities": 500})
            return httpx.Response(202, json={**state[RUN], "status": "running"})
        if method == "GET" and path.startswith("/v1/runs/") and path.endswith("/evaluation"):
            found = state.get(path.split("/")[3])
            return httpx.Response(200, json=found) if found else httpx.Response(404, json={})
        if (method, path) == ("GET", "/v1/evaluations/runs"):
            newest = sorted(state.values(), key=lambda e: e["run_id"], reverse=True)
            return httpx.Response(200, json={"evaluations": newest})
        return httpx.Response(404, json={"detail": "not here"})

    return httpx.MockTransport(handle)


def page_script(client: object) -> None:
    """Runs as the page's script (its source alone: builtins only in the signature)."""
    import importlib

    importlib.import_module("ui.sections.evaluation").render(client)


def test_the_page_evaluates_the_picked_run_and_compares_it() -> None:
    state = {OLDER: scored(OLDER, 0.5, {"entities": 1000})}
    seen: list[httpx.Request] = []
    client = ApiClient("http://api", token="t0k", transport=canned(state, seen))
    test = AppTest.from_function(page_script, args=(client,), default_timeout=30)
    test.run()
    assert not test.exception, test.exception
    assert test.selectbox(key="evaluate-run").value == RUN  # the newest run
    assert any(evaluation.NOT_EVALUATED in c.value for c in test.caption)
    assert len(test.table) == 1  # the comparison (OLDER only); no latest report
    test.button(key="evaluate-button").click().run()
    assert not test.exception, test.exception
    (post,) = [r for r in seen if r.method == "POST"]
    assert post.headers["authorization"] == "Bearer t0k"
    shown = "\n".join(m.value for m in test.markdown)
    assert f"run `{RUN}`" in shown and "Detection quality" in [s.value for s in test.subheader]
    assert len(test.get("vega_lite_chart")) == 2  # quality and latency
    comparison = test.table[1].value
    assert list(comparison.index) == [RUN, OLDER]
    assert list(comparison["pipeline · card_testing · R"]) == ["0.750", "0.500"]


def test_without_the_token_the_button_is_disabled() -> None:
    client = ApiClient("http://api", token="", transport=canned({}, []))
    test = AppTest.from_function(page_script, args=(client,), default_timeout=30)
    test.run()
    assert not test.exception, test.exception
    assert test.button(key="evaluate-button").disabled
    assert any("control token" in i.value for i in test.info)
