"""Every shipped suite runs (at a small size) and reports the JSON of docs/design.md; tuning
and report splits never share a seed; a weak bar passes and an impossible one fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.config import StackConfig, load_model
from scenarios.catalog import ScenarioConfig
from streamsim.cli.evaluate import SUITE_KEYS
from streamsim.evaluate.suite import (
    FIGURES,
    SCENARIO_LABELS,
    disjoint_seeds,
    load_suite,
    run_data,
    run_suite,
)

SUITES = sorted((Path(__file__).resolve().parents[2] / "config" / "suites").glob("*.yaml"))
#: Small runs: one seed, few entities, short (the shipped sizes take minutes each).
SMALL: dict[str, tuple[int, float]] = {  # entities, simulated seconds
    "cards": (5000, 3600.0),
    "vehicles": (80, 1500.0),
    "sensors": (1000, 600.0),  # the engine form: a local Spark batch per run
}


@pytest.fixture(autouse=True)
def pan_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMSIM_PAN_SECRET", "suite-test-secret-of-32-bytes-at-least")


def test_suites_are_shipped_in_disjoint_pairs() -> None:
    names = {p.stem for p in SUITES}
    domains = ("cards", "vehicles", "sensors")
    assert {f"{d}-{split}" for d in domains for split in ("tuning", "report")} <= names
    for domain in domains:
        tuning = load_suite(f"config/suites/{domain}-tuning.yaml")
        report = load_suite(f"config/suites/{domain}-report.yaml")
        assert (tuning.split, report.split) == ("tuning", "report")
        assert disjoint_seeds(tuning, report), domain
        assert tuning.variants == report.variants and tuning.path == report.path


#: A tuning suite runs its report twin's variants and path on other seeds (checked above), so
#: running one of each pair covers every path a shipped suite takes.
RUN_SMALL = [p for p in SUITES if not p.stem.endswith("-tuning")]


@pytest.mark.parametrize("path", RUN_SMALL, ids=[p.stem for p in RUN_SMALL])
def test_every_shipped_suite_runs_small(path: Path) -> None:
    suite = load_suite(path)
    from core.config import load_model
    from scenarios.catalog import ScenarioConfig

    name = load_model(ScenarioConfig, suite.scenario).name
    entities, duration_s = SMALL[name]
    report = run_suite(
        suite, name, StackConfig(), seeds=suite.seeds[:1], entities=entities, duration_s=duration_s
    )
    assert set(SUITE_KEYS) <= set(report)
    assert report["suite"] == suite.name and report["split"] == suite.split
    assert report["runs"] == len(suite.variants)
    assert set(report["types"]) == set(SCENARIO_LABELS[name])
    for figures in report["types"].values():
        for stat in ("mean", "worst"):
            assert set(figures[stat]) == set(FIGURES)
            for key, value in figures[stat].items():
                assert value is None or 0.0 <= value <= 1.0, key
            if figures[stat]["recall"] is not None and figures["mean"]["recall"] is not None:
                assert figures["worst"]["recall"] <= figures["mean"]["recall"]
    assert 0.0 <= report["hard_negative_rate"] <= 1.0
    assert isinstance(report["ok"], bool)
    spec: dict[str, Any] = report["chart"]
    assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
    assert spec["data"]["values"]
    detected = [r for r in report["runs_detail"] for f in r["types"].values() if f["recall"] > 0]
    assert detected, "no run detected anything: the path is not wired"


def test_the_bar_decides_ok() -> None:
    suite = load_suite("config/suites/cards-tuning.yaml")
    entities, duration_s = SMALL["cards"]
    small: dict[str, Any] = {
        "seeds": suite.seeds[:1],
        "entities": entities,
        "duration_s": duration_s,
    }
    impossible = suite.model_copy(
        update={"variants": suite.variants[:1],
                "thresholds": suite.thresholds.model_copy(update={"recall": 1.0,
                                                                   "incident_precision": 1.0,
                                                                   "hard_negative_rate": 0.0})}
    )  # fmt: skip
    report = run_suite(impossible, "cards", StackConfig(), **small)
    assert report["ok"] is False  # a bar of 1.0 everywhere
    lax = impossible.model_copy(
        update={"thresholds": impossible.thresholds.model_copy(
            update={"recall": 0.0, "incident_precision": 0.0, "hard_negative_rate": 1.0})}
    )  # fmt: skip
    assert run_suite(lax, "cards", StackConfig(), **small)["ok"] is True


def test_an_endpoint_suite_scores_the_settings_it_names(tmp_path: Path) -> None:
    shipped = load_suite("config/suites/cards-tuning.yaml")
    assert shipped.settings == Path("config/api.yaml")
    entities, duration_s = SMALL["cards"]
    off = tmp_path / "api.yaml"
    off.write_text("kind: api\nvelocity: {min_count: 100000, min_small_count: 100000}\n")
    recall = {}
    for settings in (shipped.settings, off):
        suite = shipped.model_copy(update={"variants": shipped.variants[:1], "settings": settings})
        report = run_suite(
            suite, "cards", StackConfig(), seeds=suite.seeds[:1], entities=entities,
            duration_s=duration_s,
        )  # fmt: skip
        recall[settings] = report["types"]["card_testing"]["mean"]["recall"]
    assert recall[shipped.settings] > 0.5 and recall[off] == 0.0


def test_a_variant_sets_its_own_size_and_a_shrunk_suite_still_wins() -> None:
    suite = load_suite("config/suites/cards-report.yaml")
    base = load_model(ScenarioConfig, suite.scenario)
    default, cash_out = suite.variants[0], next(v for v in suite.variants if v.name == "cash-out")
    sizes = {
        v.name: (d["entities"], d["duration_s"], d["run_id"])
        for v in (default, cash_out)
        for d in [run_data(suite, base, v, 201, "t")]
    }
    assert sizes == {"default": (20000, 7200, "t-default-201"),
                     "cash-out": (5000, 172800, "t-cash-out-201")}  # fmt: skip
    shrunk = run_data(suite, base, cash_out, 201, "t", entities=50, duration_s=60.0)
    assert (shrunk["entities"], shrunk["duration_s"]) == (50, 60.0)
